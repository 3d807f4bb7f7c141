"""The differentiable operations of ggrad, as functions (`ggrad.exp(x)`) and as Tensor methods.

Each op is declared where it is written (`@declare`, ../declaration.py); this package imports the modules that
hold them and exports every declared function. Modules by kind: unary (math, activations), binary
(arithmetic), selection (where, masked_fill), broadcast, reduce, views (reshape, permute, slices), joins (cat,
split), indexing, products (matmul, linear), neural (softmax, norms, pooling), conv, loss; and for PyTorch's
wider op set: math (rounding, trigonometry, erf, float tests), arith (div with rounding_mode, clamp with tensor
bounds), scan, sorting, shape_ops (flip, roll, repeat, tril/triu, pad, one_hot), scatter_ops, sampling,
vector_norms, einsum_lowering, resample (interpolate), logical (comparisons, any/all), torch_composites
(PyTorch's small compositions: mm, lerp, addcmul, ...). ops/__init__.pyi, generated beside this file, lists
the exports for type checkers.
"""

from .. import declaration
from . import (activations, arith, array_builders, bessel, binary, broadcast, calculus, conv,  # noqa: F401
               decompositions, einsum_lowering, extrema, float_parts, gamma_functions, hurwitz_zeta,
               incomplete_gamma, indexing, inverse_erf, joins, linear_solvers, logical, loss, lu,
               mask_index, math, membership, neural, numeric_extras, products, quant, reduce,
               reduce_into, resample, rotation, sampling, scan, scatter_ops, search, selection,
               shape_ops, sliding_windows, sorting, special_functions, statistics, tensor_products,
               torch_composites, unary, vector_norms, views)

globals().update(declaration.functions())
__all__ = list(declaration.functions())
