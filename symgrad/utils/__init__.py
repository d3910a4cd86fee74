"""``torch.utils``: the data loading of ``torch.utils.data``."""
from symgrad.utils import data  # noqa: F401
