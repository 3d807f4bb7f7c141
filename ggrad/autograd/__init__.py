"""ggrad.autograd: Tensor, Function, the backward engine and deferred execution."""

from .tensor import Tensor
from .legacy import Variable
from . import methods  # noqa: F401  (installs Tensor's operators)
from .function import Function, FunctionCtx, Node
from .gradcheck import gradcheck, GradcheckError
from .primitive import Primitive
from .parameter import Parameter
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                        is_inference_mode_enabled)
from .execution import realize
from .memory import stats
from .grad_api import grad, backward
from .hooks import RemovableHandle
from .anomaly_mode import (detect_anomaly, set_detect_anomaly, is_anomaly_enabled,
                           is_anomaly_check_nan_enabled)
from . import ops, factory
from . import functional  # noqa: E402  (vjp, jvp, jacobian, hessian, vhp, hvp)
from . import graph  # noqa: E402  (saved_tensors_hooks, save_on_cpu, disable_saved_tensors_hooks)
