"""``torch.optim``: optimizers whose updates run fused into the next step's compiled program,
and the learning-rate schedulers."""
from symgrad.optim import lr_scheduler, swa_utils
from symgrad.optim.adadelta import Adadelta
from symgrad.optim.adafactor import Adafactor
from symgrad.optim.adagrad import Adagrad
from symgrad.optim.adam import Adam, AdamW
from symgrad.optim.adam_variants import Adamax, NAdam, RAdam
from symgrad.optim.asgd import ASGD
from symgrad.optim.lbfgs import LBFGS
from symgrad.optim.optimizer import Optimizer
from symgrad.optim.rmsprop import RMSprop
from symgrad.optim.rprop import Rprop
from symgrad.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta",
           "LBFGS", "Rprop", "ASGD", "Adafactor", "lr_scheduler",
           "swa_utils"]
