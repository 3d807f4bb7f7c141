"""`F.affine_grid` and `F.grid_sample` (spatial transformer networks, deformable sampling), composed of ggrad ops.

affine_grid multiplies the normalised output coordinates [x, y(, z), 1] by each theta. grid_sample turns
each grid point into source coordinates (PyTorch's unnormalisation, border clipping or reflection), then
gathers the 2**k neighbours (bilinear/trilinear, zero outside the input for "zeros"), the nearest one, or
(bicubic, 2-D) the 4 x 4 around the point with PyTorch's cubic convolution weights (A = -0.75; each tap's
position padded on its own, as PyTorch's), and blends them with weights made from the coordinates'
fractions: the input's gradient flows through the gather, the grid's through the weights, as PyTorch's are.
"""

import itertools
import warnings

from ..autograd.arguments import kinds
from ..autograd.factory import linspace, ones
from ..autograd.ops import floor, fmod, gather, round as round_half_even, stack, where
from ..ggml.errors import ShapeError

__all__ = ["affine_grid", "grid_sample"]


def _align_corners(value):
    """align_corners, False when not given, with PyTorch's warning then."""
    if value is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=3)
    return bool(value)


def _base_coordinates(n, align_corners):
    """The normalised centres of n pixels: -1 and 1 at the corner pixels' centres (align_corners) or edges."""
    line = linspace(-1.0, 1.0, n) if n > 1 else linspace(0.0, 0.0, 1)
    return line if align_corners else line * ((n - 1) / n)


@kinds(size=None)   # checked below in PyTorch's order (theta's dtype first)
def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) for 2-D (theta (N, 2, 3), size (N, C, H, W)) or (N, D, H, W, 3) for 3-D
    affine transforms (theta (N, 3, 4)); align_corners defaults to False, as PyTorch."""
    align_corners = _align_corners(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {list(size)}.")
    k = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (k, k + 1):
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {list(size)}. "
                         f"Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {list(size)}")
    if theta.shape[0] != size[0]:
        raise ShapeError(f"affine_grid: theta has {theta.shape[0]} matrices for a batch of {size[0]}")
    spatial = size[2:]
    axes = [_base_coordinates(n, align_corners) for n in reversed(spatial)]   # x (the last dim) first
    points = 1
    for n in spatial:
        points *= n
    columns = []
    for i, axis in enumerate(axes):   # each coordinate broadcast over the output's spatial shape
        shape = [1] * k
        shape[k - 1 - i] = spatial[k - 1 - i]
        columns.append(axis.to(theta.dtype).reshape(shape).expand(*spatial).reshape(points))
    columns.append(ones(points, dtype=theta.dtype))
    base = stack(columns, 1)                                   # (points, k + 1)
    grid = base.unsqueeze(0) @ theta.transpose(1, 2)           # (N, points, k)
    return grid.reshape(size[0], *spatial, k)


def _unnormalize(g, n, align_corners):
    return (g + 1.0) * ((n - 1) / 2.0) if align_corners else ((g + 1.0) * n - 1.0) / 2.0


def _reflect(x, twice_low, twice_high):
    """x reflected into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates)."""
    if twice_low == twice_high:
        return x * 0.0
    low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    x = (x - low).abs()
    extra = fmod(x, span)
    flips = floor(x / span).detach()
    even = fmod(flips, 2.0) == 0
    return where(even, extra + low, span - extra + low)


def _clip(x, n):
    """x clamped into [0, n - 1], its gradient 0 on the bounds too (PyTorch's clip_coordinates_set_grad)."""
    return where((x > 0.0) & (x < n - 1.0), x, x.clamp(0.0, n - 1.0).detach())


def _source_coordinate(g, n, padding_mode, align_corners):
    x = _unnormalize(g, n, align_corners)
    if padding_mode == "border":
        return _clip(x, n)
    if padding_mode == "reflection":
        x = _reflect(x, 0.0, 2.0 * (n - 1)) if align_corners else _reflect(x, -1.0, 2.0 * n - 1.0)
        return _clip(x, n)
    return x


def _check(input, grid, mode, padding_mode):  # noqa: A002 (PyTorch's name)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" and input.ndim != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ShapeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                         f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise ShapeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                         f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise ShapeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                         f"grid with sizes {list(grid.shape)}")
    if any(s == 0 for s in input.shape[2:]):
        raise ShapeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                         f"{list(input.shape)} with dimension {input.shape.index(0)} being empty")


@kinds(mode=None, padding_mode=None)   # PyTorch's ValueError for any value but its names
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """Samples `input` (N, C, H, W) at `grid` (N, Ho, Wo, 2) of normalised (x, y) in [-1, 1] (5-D: (N, C, D,
    H, W) at (N, Do, Ho, Wo, 3)); mode "bilinear" or "nearest", padding_mode "zeros", "border" or
    "reflection", align_corners default False, as PyTorch; mode "bicubic" for 4-D input."""
    _check(input, grid, mode, padding_mode)
    align_corners = _align_corners(align_corners)
    n, c, spatial = input.shape[0], input.shape[1], tuple(input.shape[2:])
    k, out_spatial = len(spatial), tuple(grid.shape[1:-1])
    points = 1
    for s in out_spatial:
        points *= s
    flat_grid = grid.reshape(n, points, k)
    if mode == "bicubic":
        taps = [_cubic_taps(_unnormalize(flat_grid[:, :, k - 1 - d], spatial[d], align_corners), spatial[d],
                            padding_mode, align_corners) for d in range(k)]
        return _blend(input, taps, spatial, out_spatial)
    coords = [_source_coordinate(flat_grid[:, :, k - 1 - d], spatial[d], padding_mode, align_corners)
              for d in range(k)]   # per input dim, in input order (the grid's last entry is the first dim)
    if mode == "nearest":
        taps = [[(round_half_even(x).detach(), None)] for x in coords]
    else:
        taps = []
        for x in coords:
            low = floor(x).detach()
            frac = x - low
            taps.append([(low, 1.0 - frac), (low + 1.0, frac)])
    if mode == "nearest" and grid.requires_grad:   # the grid gets PyTorch's zero gradient
        taps[0] = [(taps[0][0][0], coords[0] * 0.0 + 1.0)]
    return _blend(input, taps, spatial, out_spatial)


_CUBIC_A = -0.75


def _cubic_taps(x, n, padding_mode, align_corners):
    """The 4 (position, weight) taps of cubic convolution around x: positions floor(x) - 1 .. floor(x) + 2,
    each padded as PyTorch pads them (border: clipped; reflection: reflected, then clipped)."""
    low = floor(x).detach()
    t = x - low
    a = _CUBIC_A
    weights = [((a * (t + 1.0) - 5.0 * a) * (t + 1.0) + 8.0 * a) * (t + 1.0) - 4.0 * a,
               ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
               ((a + 2.0) * (1.0 - t) - (a + 3.0)) * (1.0 - t) * (1.0 - t) + 1.0,
               ((a * (2.0 - t) - 5.0 * a) * (2.0 - t) + 8.0 * a) * (2.0 - t) - 4.0 * a]
    taps = []
    for i, w in enumerate(weights):
        position = low + float(i - 1)
        if padding_mode == "border":
            position = position.clamp(0.0, n - 1.0)
        elif padding_mode == "reflection":
            position = _reflect(position, 0.0, 2.0 * (n - 1)) if align_corners else \
                _reflect(position, -1.0, 2.0 * n - 1.0)
            position = position.clamp(0.0, n - 1.0)
        taps.append((position.detach(), w))
    return taps


def _blend(input, taps, spatial, out_spatial):  # noqa: A002
    """sum over the corners (one tap per dim) of the gathered input times the taps' weights product, zero
    where a tap falls outside the input."""
    n, c = input.shape[0], input.shape[1]
    points = 1
    for s in out_spatial:
        points *= s
    values = input.reshape(n, c, -1)
    out = None
    for corner in itertools.product(*taps):
        index, weight, inside = None, None, None
        for d, (position, w) in enumerate(corner):
            valid = (position >= 0) & (position <= spatial[d] - 1)
            inside = valid if inside is None else inside & valid
            stride = 1
            for s in spatial[d + 1:]:
                stride *= s
            term = position.round().clamp(0, spatial[d] - 1) * stride
            index = term if index is None else index + term
            if w is not None:
                weight = w if weight is None else weight * w
        mask = inside.to(input.dtype)
        weight = mask if weight is None else weight * mask
        picked = gather(values, 2, index.long().unsqueeze(1).expand(n, c, points))
        term = picked * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape(n, c, *out_spatial)
