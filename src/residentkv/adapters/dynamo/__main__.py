"""``python -m residentkv.adapters.dynamo run``: see :mod:`.run`."""

import sys

from residentkv.adapters.dynamo.run import main

sys.exit(main())
