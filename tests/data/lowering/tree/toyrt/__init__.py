"""toyrt: a tiny stand-in runtime used as an anchor-verification source tree in tests."""
