"""``torch.utils``: the data loading of ``torch.utils.data`` and ``torch.utils.checkpoint``."""
from symgrad.utils import checkpoint, data  # noqa: F401
