"""Model-specific builders: state-space models (Mamba), RWKV, gated linear/delta attention, the DeepSeek
lightning indexer and hyper-connections, SAM's relative positions and windows."""

from .._lib import lib
from . import _check as chk
from ._check import make, tensor

__all__ = ["ssm_conv", "ssm_scan", "rwkv_wkv6", "rwkv_wkv7", "gated_linear_attn", "gated_delta_net",
           "lightning_indexer", "dsv4_hc_comb", "dsv4_hc_pre", "dsv4_hc_post", "get_rel_pos", "add_rel_pos",
           "add_rel_pos_inplace", "win_part", "win_unpart"]

_INT32_MAX = 2**31 - 1


def _f32(op, named):
    out = []
    for name, x in named:
        p = tensor(op, name, x)
        chk.types(op, name, p, chk.ONLY_F32)
        out.append(p)
    return out


def _need(op, ok, text):
    if not ok:
        chk.fail(op, text)


def ssm_conv(ctx, sx, c):
    """Mamba's causal 1-D convolution: sx [d_conv - 1 + n_t, d_inner, n_s] and c [d_conv, d_inner] give
    f32 [d_inner, n_t, n_s].

    Args:
        ctx: the Context the result is made in.
        sx: f32 conv states concatenated with the inputs, contiguous in dims 0 and 1.
        c: f32 conv weights [d_conv, d_inner] with contiguous rows.
    """
    op = "ssm_conv"
    ps, pc = _f32(op, (("sx", sx), ("c", c)))
    ns, nc = chk.ne(ps), chk.ne(pc)
    _need(op, ns[3] == 1 and nc[2] == 1 and nc[3] == 1 and ns[1] == nc[1] and ns[0] - nc[0] + 1 >= 0,
          f"sx ne={ns} and c ne={nc} don't match (need sx 3-D, c a matrix, sx.ne[1] == c.ne[1], "
          "sx.ne[0] >= c.ne[0] - 1)")
    _need(op, ps.nb[0] == 4 and ps.nb[1] == ns[0] * 4 and pc.nb[0] == 4,
          "sx must be contiguous in dims 0 and 1 and c must have contiguous rows")
    return make(ctx, op, lib.ggml_ssm_conv, ps, pc)


def ssm_scan(ctx, s, x, dt, A, B, C, ids, K):
    """Mamba's selective scan; the result packs y (x's size) followed by K final-state snapshots per sequence.

    Args:
        ctx: the Context the result is made in.
        s: f32 states [d_state, head_dim, n_head, n_rs], contiguous.
        x: f32 inputs [head_dim, n_head, n_seq_tokens, n_seqs].
        dt: f32 time steps [n_head, n_seq_tokens, n_seqs], contiguous.
        A: f32 decay [1 or d_state, n_head], contiguous.
        B: f32 [d_state, n_group, n_seq_tokens, n_seqs].
        C: f32 [d_state, n_group, n_seq_tokens, n_seqs].
        ids: i32 state index per sequence [n_seqs].
        K: snapshots kept (>= 1; 1 when A has d_state columns).
    """
    op = "ssm_scan"
    ps, px, pdt, pA, pB, pC = _f32(op, (("s", s), ("x", x), ("dt", dt), ("A", A), ("B", B), ("C", C)))
    pi = tensor(op, "ids", ids)
    chk.types(op, "ids", pi, frozenset({chk.I32}))
    chk.integer(op, "K", K, 1, _INT32_MAX)
    for name, p in (("s", ps), ("dt", pdt), ("A", pA)):
        chk.contiguous(op, name, p)
    for name, p in (("x", px), ("B", pB), ("C", pC)):
        _need(op, p.nb[0] == 4 and p.nb[1] == p.ne[0] * 4, f"{name} must be contiguous in dims 0 and 1")
    chk.same_shape(op, pB, pC, "B", "C")
    ns, nx, nd, na, nb, ni = chk.ne(ps), chk.ne(px), chk.ne(pdt), chk.ne(pA), chk.ne(pB), chk.ne(pi)
    d_state, head_dim, n_head, n_tok, n_seqs = ns[0], nx[0], nx[1], nx[2], nx[3]
    _need(op, nd[:3] == [n_head, n_tok, n_seqs] and nd[3] == 1 and ns[1] == head_dim and ns[2] == n_head
          and nb[0] == d_state and nb[2] == n_tok and nb[3] == n_seqs and ni == [n_seqs, 1, 1, 1]
          and na[1] == n_head and na[2:] == [1, 1] and chk.divides(nb[1], n_head),
          f"shapes don't match: s ne={ns}, x ne={nx}, dt ne={nd}, A ne={na}, B ne={nb}, ids ne={ni}")
    if na[0] != 1:
        _need(op, na[0] == d_state and K == 1, f"A ne={na}: per-state decay needs A.ne[0] == d_state and K == 1")
    return make(ctx, op, lib.ggml_ssm_scan, ps, px, pdt, pA, pB, pC, pi, K)


def _rwkv_shapes(op, named, pk, pstate):
    n = chk.ne(pk)
    S, H, T = n[0], n[1], n[2]
    for name, p in named:
        chk.contiguous(op, name, p)
    for name, p in named:
        if name in ("state", "tf"):
            continue
        m = chk.ne(p)
        _need(op, m[:3] == [S, H, T], f"{name} ne={m} must match k's [S, H, n_tokens] = {[S, H, T]}")
    ms = chk.ne(pstate)
    _need(op, H > 0 and ms[1] > 0 and chk.nelements(pstate) == S * S * H * ms[1],
          f"state ne={ms} must hold S*S*H*n_seqs = {S}*{S}*{H}*{ms[1]} values")


def rwkv_wkv6(ctx, k, v, r, tf, td, state):
    """RWKV v6 time mixing; the result packs the output [S*H, n_tokens] and the new state [S*H, S*n_seqs].

    Args:
        ctx: the Context the result is made in.
        k: keys [S, H, n_tokens] (contiguous f32; all inputs below too).
        v: values [S, H, n_tokens].
        r: receptance [S, H, n_tokens].
        tf: time_first (bonus) [S, H].
        td: time decay [S, H, n_tokens].
        state: [S*S*H, n_seqs] previous state.
    """
    op = "rwkv_wkv6"
    ps = _f32(op, (("k", k), ("v", v), ("r", r), ("tf", tf), ("td", td), ("state", state)))
    named = list(zip(("k", "v", "r", "tf", "td", "state"), ps))
    _rwkv_shapes(op, named, ps[0], ps[5])
    _need(op, chk.nelements(ps[3]) == ps[0].ne[0] * ps[0].ne[1], f"tf ne={chk.ne(ps[3])} must hold S*H values")
    return make(ctx, op, lib.ggml_rwkv_wkv6, *ps)


def gated_linear_attn(ctx, k, v, q, g, state, scale):
    """Gated linear attention; the result packs the output [S*H, n_tokens] and the new state.

    Args:
        ctx: the Context the result is made in.
        k: keys [S, H, n_tokens] (contiguous f32; all inputs below too).
        v: values [S, H, n_tokens].
        q: queries [S, H, n_tokens].
        g: gates [S, H, n_tokens].
        state: [S*S*H, n_seqs] previous state.
        scale: factor on the output.
    """
    op = "gated_linear_attn"
    ps = _f32(op, (("k", k), ("v", v), ("q", q), ("g", g), ("state", state)))
    _rwkv_shapes(op, list(zip(("k", "v", "q", "g", "state"), ps)), ps[0], ps[4])
    return make(ctx, op, lib.ggml_gated_linear_attn, *ps, float(scale))


def rwkv_wkv7(ctx, r, w, k, v, a, b, state):
    """RWKV v7 time mixing; the result packs the output [S*H, n_tokens] and the new state.

    Args:
        ctx: the Context the result is made in.
        r: receptance [S, H, n_tokens] (contiguous f32; all inputs below too).
        w: decay [S, H, n_tokens].
        k: keys [S, H, n_tokens].
        v: values [S, H, n_tokens].
        a: in-context learning rate term [S, H, n_tokens].
        b: [S, H, n_tokens].
        state: [S*S*H, n_seqs] previous state.
    """
    op = "rwkv_wkv7"
    ps = _f32(op, (("r", r), ("w", w), ("k", k), ("v", v), ("a", a), ("b", b), ("state", state)))
    _rwkv_shapes(op, list(zip(("r", "w", "k", "v", "a", "b", "state"), ps)), ps[2], ps[6])
    return make(ctx, op, lib.ggml_rwkv_wkv7, *ps)


def gated_delta_net(ctx, q, k, v, g, beta, state, K):
    """Gated delta rule (Qwen3-Next, Kimi); the result packs the output [S_v*H, n_tokens*n_seqs] and K state
    snapshots.

    Args:
        ctx: the Context the result is made in.
        q: f32 queries [S_k, H_k, n_tokens, n_seqs] with contiguous rows (S_k == S_v, H_v % H_k == 0).
        k: f32 keys, q's shape, contiguous rows.
        v: f32 values [S_v, H_v, n_tokens, n_seqs], contiguous rows.
        g: contiguous f32 gates [1 or S_v, H_v, n_tokens, n_seqs].
        beta: contiguous f32 [1, H_v, n_tokens, n_seqs].
        state: contiguous f32 initial state [S_v, S_v, H_v, n_seqs].
        K: state snapshots kept (>= 1).
    """
    op = "gated_delta_net"
    pq, pk, pv, pg, pb, ps = _f32(op, (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("state", state)))
    chk.integer(op, "K", K, 1, _INT32_MAX)
    for name, p in (("q", pq), ("k", pk), ("v", pv)):
        chk.contiguous_rows(op, name, p)
    for name, p in (("g", pg), ("beta", pb), ("state", ps)):
        chk.contiguous(op, name, p)
    nq, nk, nv, ng, nb, ns = chk.ne(pq), chk.ne(pk), chk.ne(pv), chk.ne(pg), chk.ne(pb), chk.ne(ps)
    S, H, T, N = nv
    _need(op, nq == nk and nq[0] == S and chk.divides(nq[1], H) and nq[2:] == [T, N]
          and ng[0] in (1, S) and ng[1:] == [H, T, N] and nb == [1, H, T, N] and ns == [S, S, H, N],
          f"shapes don't match: q ne={nq}, k ne={nk}, v ne={nv}, g ne={ng}, beta ne={nb}, state ne={ns}")
    return make(ctx, op, lib.ggml_gated_delta_net, pq, pk, pv, pg, pb, ps, K)


def lightning_indexer(ctx, q, k, weights, mask):
    """DeepSeek's lightning indexer scores: f32 [n_kv, n_batch, 1, ne3].

    Args:
        ctx: the Context the result is made in.
        q: f32 [n_embd_idx, n_head_idx, n_batch, ne3], contiguous rows.
        k: f32/f16 [n_embd_idx, 1, n_kv, ne3], contiguous rows.
        weights: f32 prescaled head weights [n_head_idx, n_batch, 1, ne3], contiguous rows.
        mask: f16 [n_kv, n_batch, 1, ne33] with ne3 % ne33 == 0, contiguous rows.
    """
    op = "lightning_indexer"
    pq, pw = _f32(op, (("q", q), ("weights", weights)))
    pk, pm = tensor(op, "k", k), tensor(op, "mask", mask)
    chk.types(op, "k", pk, chk.F32_F16)
    chk.types(op, "mask", pm, frozenset({chk.F16}))
    for name, p in (("q", pq), ("k", pk), ("weights", pw), ("mask", pm)):
        chk.contiguous_rows(op, name, p)
    nq, nk, nw, nm = chk.ne(pq), chk.ne(pk), chk.ne(pw), chk.ne(pm)
    _need(op, nq[0] == nk[0] and nm[0] == nk[2] and nq[1] == nw[0] and nk[1] == 1 and nm[1] == nq[2]
          and nq[2] == nw[1] and nw[2] == 1 and nm[2] == 1 and nq[3] == nk[3] == nw[3] and chk.divides(nm[3], nw[3]),
          f"shapes don't match: q ne={nq}, k ne={nk}, weights ne={nw}, mask ne={nm}")
    return make(ctx, op, lib.ggml_lightning_indexer, pq, pk, pw, pm)


def dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter):
    """DeepSeek V4 hyper-connection mixing matrices (softmax + Sinkhorn): f32 [hc, hc, n_tokens] with hc = 4.

    Args:
        ctx: the Context the result is made in.
        mixes: f32 [(2 + hc) * hc, n_tokens] = [24, n_tokens].
        scale: f32 vector of >= 3 scales.
        base: f32 vector [(2 + hc) * hc].
        eps: added after the softmax.
        n_iter: Sinkhorn iterations (>= 1).
    """
    op = "dsv4_hc_comb"
    pm, ps, pb = _f32(op, (("mixes", mixes), ("scale", scale), ("base", base)))
    chk.integer(op, "n_iter", n_iter, 1, _INT32_MAX)
    nm, ns, nb = chk.ne(pm), chk.ne(ps), chk.ne(pb)
    _need(op, nm[0] == 24 and nm[2:] == [1, 1] and ns[0] >= 3 and ns[1:] == [1, 1, 1] and nb == [24, 1, 1, 1],
          f"shapes don't match (hc must be 4): mixes ne={nm}, scale ne={ns}, base ne={nb}")
    return make(ctx, op, lib.ggml_dsv4_hc_comb, pm, ps, pb, float(eps), n_iter)


def dsv4_hc_pre(ctx, x, weights):
    """DeepSeek V4 hyper-connection input mix: result[i, t] = sum_h x[i, h, t] * weights[h, t], f32 [n_embd, n_tokens].

    Args:
        ctx: the Context the result is made in.
        x: f32 streams [n_embd, hc, n_tokens].
        weights: f32 [hc, n_tokens].
    """
    op = "dsv4_hc_pre"
    px, pw = _f32(op, (("x", x), ("weights", weights)))
    nx, nw = chk.ne(px), chk.ne(pw)
    _need(op, nx[1] > 0 and nx[3] == 1 and nw == [nx[1], nx[2], 1, 1],
          f"x ne={nx} and weights ne={nw} don't match (weights [hc, n_tokens])")
    return make(ctx, op, lib.ggml_dsv4_hc_pre, px, pw)


def dsv4_hc_post(ctx, x, residual, post, comb):
    """DeepSeek V4 hyper-connection output: x * post + residual mixed by comb, f32 [n_embd, hc, n_tokens].

    Args:
        ctx: the Context the result is made in.
        x: f32 [n_embd, n_tokens].
        residual: f32 streams [n_embd, hc, n_tokens].
        post: f32 [hc, n_tokens].
        comb: f32 [hc, hc, n_tokens] (dst, src, token).
    """
    op = "dsv4_hc_post"
    px, pr, pp, pc = _f32(op, (("x", x), ("residual", residual), ("post", post), ("comb", comb)))
    nx, nr, np_, nc = chk.ne(px), chk.ne(pr), chk.ne(pp), chk.ne(pc)
    hc, T = nr[1], nx[1]
    _need(op, hc > 0 and nx[2:] == [1, 1] and nr == [nx[0], hc, T, 1] and np_ == [hc, T, 1, 1]
          and nc == [hc, hc, T, 1],
          f"shapes don't match: x ne={nx}, residual ne={nr}, post ne={np_}, comb ne={nc}")
    return make(ctx, op, lib.ggml_dsv4_hc_post, px, pr, pp, pc)


def get_rel_pos(ctx, a, qh, kh):
    """SAM's relative position table lookup: f16 [a.ne0, kh, qh].

    Args:
        ctx: the Context the result is made in.
        a: f16/bf16 table [C, 2 * qh - 1].
        qh: query height (== kh).
        kh: key height.
    """
    op = "get_rel_pos"
    pa = tensor(op, "a", a)
    chk.types(op, "a", pa, frozenset({chk.F16, chk.BF16}))
    chk.integer(op, "qh", qh, 1, _INT32_MAX)
    chk.integer(op, "kh", kh, 1, _INT32_MAX)
    _need(op, qh == kh and pa.ne[1] == 2 * qh - 1, f"need qh == kh and a.ne[1] == 2*qh - 1 (a ne={chk.ne(pa)}, "
                                                   f"qh={qh}, kh={kh})")
    return make(ctx, op, lib.ggml_get_rel_pos, pa, qh, kh)


def _add_rel_pos(name, inplace):
    fn = getattr(lib, "ggml_" + name)

    def builder(ctx, a, pw, ph):
        pa, ppw, pph = _f32(name, (("a", a), ("pw", pw), ("ph", ph)))
        chk.same_shape(name, ppw, pph, "pw", "ph")
        for n, p in (("a", pa), ("pw", ppw), ("ph", pph)):
            chk.contiguous(name, n, p)
        na, nw = chk.ne(pa), chk.ne(ppw)
        _need(name, nw[3] == na[2] and nw[0] * nw[0] == na[0] and nw[1] * nw[2] == na[1],
              f"a ne={na} and pw ne={nw} don't match (need pw.ne[3] == a.ne[2], pw.ne[0]^2 == a.ne[0], "
              "pw.ne[1] * pw.ne[2] == a.ne[1])")
        return make(ctx, name, fn, pa, ppw, pph)

    note = "\n\nIn place: the result is a view of `a`; computing it overwrites `a`'s memory." if inplace else ""
    doc = (f"SAM's decomposed relative position bias added to attention scores `a`.{note}\n\n"
           "Args:\n    ctx: the Context the result is made in.\n    a: contiguous f32 attention scores.\n"
           "    pw: contiguous f32 width terms.\n    ph: contiguous f32 height terms (pw's shape).\n")
    return chk.finish(builder, doc, name, __name__)


add_rel_pos = _add_rel_pos("add_rel_pos", False)
add_rel_pos_inplace = _add_rel_pos("add_rel_pos_inplace", True)


def win_part(ctx, a, w):
    """Partition [C, W, H] into non-overlapping w x w windows (zero padded): f32 [C, w, w, n_windows].

    Args:
        ctx: the Context the result is made in.
        a: f32 [C, W, H, 1].
        w: window size (>= 1).
    """
    pa = tensor("win_part", "a", a)
    chk.types("win_part", "a", pa, chk.ONLY_F32)
    chk.integer("win_part", "w", w, 1, _INT32_MAX)
    _need("win_part", pa.ne[3] == 1, f"a ne={chk.ne(pa)} must be 3-D")
    return make(ctx, "win_part", lib.ggml_win_part, pa, w)


def win_unpart(ctx, a, w0, h0, w):
    """Reverse of ops.win_part: windows [C, w, w, n_windows] back to f32 [C, w0, h0].

    Args:
        ctx: the Context the result is made in.
        a: f32 windows [C, w, w, n_windows] from win_part.
        w0: original width (>= 1).
        h0: original height (>= 1).
        w: window size (>= 1).
    """
    op = "win_unpart"
    pa = tensor(op, "a", a)
    chk.types(op, "a", pa, chk.ONLY_F32)
    for name, v in (("w0", w0), ("h0", h0), ("w", w)):
        chk.integer(op, name, v, 1, _INT32_MAX)
    npx, npy = -(-w0 // w), -(-h0 // w)
    _need(op, chk.ne(pa)[1:] == [w, w, npx * npy], f"a ne={chk.ne(pa)} is not the win_part of a {w0}x{h0} input "
                                                 f"with w={w} (expected [C, {w}, {w}, {npx * npy}])")
    return make(ctx, op, lib.ggml_win_unpart, pa, w0, h0, w)
