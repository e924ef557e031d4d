"""``python -m torch_tpu.conformance``: see torch_tpu/conformance/__init__.py."""

import sys

from torch_tpu.conformance import main

sys.exit(main())
