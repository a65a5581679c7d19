# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Pure models of the decode kernel on the CPU: the shared-memory addressing of its wgmma
operands (Q/K K-major, V read MN-major from the K tile) and its algorithm (scheduler parts,
64-token blocks, online softmax in the log2 domain with P rounded to the dtype, per-split
out/lse, log-sum-exp combine) against the kernel module's fp32 reference."""

import math

import pytest
import torch

from tirx_kernels.core.sm90.layouts import Swizzle, swizzle_bytes, tile_offset
from tirx_kernels.core.sm90.wgmma import decode_descriptor
from tirx_kernels.flashmla import _mla_decode_tirx as K
from tirx_kernels.flashmla import _mla_decode_v5_tirx as V5
from tirx_kernels.flashmla._mla_decode_schedule import num_sm_parts, sched_meta
from tirx_kernels.flashmla.kernels import flash_mla_decode as contract


def fill_offset(row, col):
    """Where _load_q/_load_page put element (row, col) of a 64 x 576 tile (16-byte chunks)."""
    ch, inner = divmod(col, 8)
    return (ch // 8) * 8192 + row * 128 + ((ch % 8) ^ (row % 8)) * 16 + inner * 2


def test_cp_async_fill_is_the_swizzled_kmajor_tile_format():
    for row in range(64):
        for col in range(0, 576, 3):
            assert fill_offset(row, col) == tile_offset(
                row, col, rows=64, elem_bytes=2, mode=Swizzle.B128
            )


def test_v_descriptor_reads_v_mn_major_from_the_k_tile():
    """CUTLASS's canonical MN-major 128B layout ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): element
    (k, n) of one k16 B slice lies at 2*(n % 64) + LBO*(n // 64) + 128*(k % 8) + SBO*(k // 8)
    bytes (before the swizzle) from the descriptor's start."""
    d = decode_descriptor(K._DESC_V)
    assert (d["lbo"], d["sbo"], d["mode"]) == (8192, 1024, Swizzle.B128)
    for wg in range(2):
        for kk in range(4):
            start = wg * K._V_HALF + kk * 16 * 128
            for k in range(16):
                for n in range(0, 256, 5):
                    logical = 2 * (n % 64) + d["lbo"] * (n // 64) + 128 * (k % 8)
                    logical += d["sbo"] * (k // 8)
                    got = swizzle_bytes(start + logical, Swizzle.B128)
                    assert got == fill_offset(16 * kk + k, 256 * wg + n)


def test_v5_p_tile_stores_are_what_its_ss_wgmmas_read():
    """v5: a thread stores its P fragments (row, 8 chunk + c0) as 4-byte pairs at the byte
    ``_p_word`` computes (row * 128 + (chunk ^ row % 8) * 16 + 2 c0); the SS wgmma of k16
    step kk reads the K-major 128B tile at 32 kk, i.e. element (row, 16 kk + k) at
    tile_offset (the Q tile's format, one atom block)."""
    for t in range(128):
        lane = t % 32
        r0, c0 = 16 * (t // 32) + lane // 4, 2 * (lane % 4)
        for q in range(V5.PAGE // 4):
            prow, chunk = r0 + 8 * (q % 2), q // 2
            byte = prow * 128 + (chunk ^ (prow % 8)) * 16 + c0 * 2
            tok = 8 * chunk + c0
            assert byte == tile_offset(prow, tok, rows=64, elem_bytes=2, mode=Swizzle.B128)
    d = decode_descriptor(K._DESC_K)
    assert (d["sbo"], d["mode"]) == (1024, Swizzle.B128)
    assert V5.P0_OFF % 1024 == 0 and V5.P1_OFF % 1024 == 0
    assert V5.SMEM + 2048 <= 227 * 1024  # + the static max, rescales and sums: the sm_90 limit
    for kk in range(4):
        assert K._S_STEPS[kk] == tile_offset(0, 16 * kk, rows=64, elem_bytes=2, mode=Swizzle.B128)


def test_qk_descriptor_is_kmajor_128b():
    d = decode_descriptor(K._DESC_K)
    assert (d["sbo"], d["mode"]) == (1024, Swizzle.B128)
    assert K._S_STEPS[:5] == [0, 32, 64, 96, 8192]


def emulate(q, k_cache, table, seqlens, causal, scale, dtype, num_sms=132, pairs=False):
    """The kernel's arithmetic, CTA by CTA (fp32, P rounded to ``dtype``); with ``pairs``,
    v5's (pages in pairs, the max chained through shared memory: :func:`pair_softmax`)."""
    b, s_q, h_q, d = q.shape
    R = s_q * h_q
    qr = q.float().reshape(b, R, d)
    kc = k_cache.float().reshape(-1, d)
    lens = seqlens.tolist()
    rows_meta, splits = sched_meta(lens, num_sm_parts(num_sms, R, 1))
    oacc = torch.full((splits[-1], R, 512), float("nan"))
    lacc = torch.full((splits[-1], R), float("nan"))
    row_ids = torch.arange(R)
    maxb, num_blocks = table.shape[1], k_cache.shape[0]
    for begin, end, bblk, eblk, bsplit, *_ in rows_meta:
        for req in range(begin, end + 1):
            nblk = min(-(-lens[req] // 64), maxb)  # the device guard: blocks inside the table
            lo = bblk if req == begin else 0
            hi = min(eblk if req == end else nblk, nblk)
            split = splits[req] + (bsplit if req == begin else 0)
            lim = torch.full((R,), lens[req])
            if causal and s_q > 1:
                lim = lens[req] - s_q + 1 + row_ids // h_q
            m = torch.full((R,), -math.inf)
            lsum = torch.zeros(R)
            o = torch.zeros(R, 512)

            def scores(blk, masked_value=-math.inf, req=req, lim=lim):
                entry = int(table[req, blk])
                ok = 0 <= entry < num_blocks  # the device guard: entries inside the cache
                page = entry if ok else 0
                tok = blk * 64 + torch.arange(64)
                kv = kc[page * 64 : page * 64 + 64].clone()
                kv[(tok >= lens[req]) | (not ok)] = 0.0  # zero-filled rows
                s = (qr[req] @ kv.T) * (scale * math.log2(math.e))
                masked = (tok[None, :] >= lim[:, None]) | (not ok)
                return s.masked_fill(masked, masked_value), kv

            if pairs:
                m, lsum, o = pair_softmax(scores, lo, hi, R, dtype)
            else:
                for blk in range(lo, hi):
                    s, kv = scores(blk)
                    mx = torch.maximum(m, s.max(dim=1).values)
                    safe = torch.where(mx == -math.inf, torch.zeros_like(mx), mx)
                    corr = torch.exp2(m - safe)
                    p = torch.exp2(s - safe[:, None])
                    lsum = lsum * corr + p.sum(dim=1)
                    m = mx
                    o = o * corr[:, None] + p.to(dtype).float() @ kv[:, :512]
            empty = lsum == 0
            oacc[split] = torch.where(empty[:, None], 0.0, o / lsum[:, None])
            lacc[split] = torch.where(empty, -math.inf, m * math.log(2) + torch.log(lsum))
    out = torch.empty(b, R, 512)
    lse = torch.empty(b, R)
    for req in range(b):
        ls = lacc[splits[req] : splits[req + 1]]
        mx = ls.max(dim=0).values if len(ls) else torch.full((R,), -math.inf)
        safe = torch.where(mx == -math.inf, torch.zeros_like(mx), mx)
        tot = torch.exp(ls - safe).sum(dim=0)
        lse[req] = torch.where(tot == 0, math.inf, safe + torch.log(tot))
        w = torch.exp(ls - lse[req])
        w = torch.where(tot[None, :] == 0, 0.0, w)
        out[req] = (w[:, :, None] * oacc[splits[req] : splits[req + 1]]).sum(dim=0)
    out = out.to(dtype).reshape(b, s_q, h_q, 512)
    return out, lse.reshape(b, s_q, h_q).transpose(1, 2)


def pair_softmax(scores, lo, hi, R, dtype):
    """v5's blocks ``lo..hi`` in pairs (a, b): warpgroup 0 folds page a into the running max
    (rescale ``sc0``) and keeps O's columns 0..255, warpgroup 1 folds page b on top (``sc1``)
    and keeps 256..511; P_a goes to warpgroup 1 rescaled by ``sc1``, P_b to warpgroup 0 as it
    is, each rounded to the dtype; masked scores are finite. -> (m, l, O) of the request."""
    masked, m_init = V5.MASKED, V5.M_INIT
    m = torch.full((R,), m_init)
    l0, l1 = torch.zeros(R), torch.zeros(R)
    o0, o1 = torch.zeros(R, 256), torch.zeros(R, 256)

    def rnd(p):  # P as the kernel feeds it to a wgmma: rounded to the dtype
        return p.to(dtype).float()

    for a in range(lo, hi, 2):
        s_a, kv_a = scores(a, masked)
        m_a = torch.maximum(m, s_a.max(dim=1).values)
        sc0 = torch.exp2(m - m_a)
        p_a = torch.exp2(s_a - m_a[:, None])
        o0 = o0 * sc0[:, None] + rnd(p_a) @ kv_a[:, :256]
        l0 = l0 * sc0 + p_a.sum(dim=1)
        if a + 1 < hi:
            s_b, kv_b = scores(a + 1, masked)
        else:
            s_b, kv_b = torch.full_like(s_a, masked), torch.zeros_like(kv_a)
        m_b = torch.maximum(m_a, s_b.max(dim=1).values)
        sc1 = torch.exp2(m_a - m_b)
        p_b = torch.exp2(s_b - m_b[:, None])
        f = sc1 * sc0
        o1 = (
            o1 * f[:, None]
            + rnd(p_b) @ kv_b[:, 256:512]
            + rnd(p_a * sc1[:, None]) @ kv_a[:, 256:512]
        )
        l1 = l1 * f + p_b.sum(dim=1)
        o0 = o0 * sc1[:, None] + rnd(p_b) @ kv_b[:, :256]
        l0 = l0 * sc1
        m = m_b
    return m, l0 + l1, torch.cat([o0, o1], dim=1)


@pytest.mark.parametrize(
    "cfg",
    [
        dict(dtype="bfloat16", h_q=16, s_q=1, batch=6, s_k=150, varlen=True, causal=False),
        dict(dtype="float16", h_q=16, s_q=2, batch=5, s_k=100, varlen=True, causal=True),
        dict(dtype="bfloat16", h_q=64, s_q=2, batch=2, s_k=129, varlen=False, causal=False),
        dict(dtype="bfloat16", h_q=16, s_q=1, batch=1, s_k=1500, varlen=False, causal=False),
        dict(dtype="bfloat16", h_q=16, s_q=1, batch=6, s_k=400, varlen=True, badpages=True),
        dict(dtype="float16", h_q=16, s_q=2, batch=5, s_k=300, causal=True, badpages=True),
    ],
    ids=["h16_var", "h16_sq2_causal", "h64_sq2", "h16_long_split", "badpages", "badpages_sq2"],
)
@pytest.mark.parametrize("pairs", [False, True], ids=["blocks", "v5_pairs"])
def test_emulated_kernel_matches_the_reference_at_flashmlas_tolerances(cfg, pairs, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    q, k_cache, table, seqlens = contract.prepare_data(**cfg)
    dtype = getattr(torch, cfg["dtype"])
    scale = 576**-0.5
    causal = cfg.get("causal", False)
    out, lse = emulate(q, k_cache, table, seqlens, causal, scale, dtype, num_sms=8, pairs=pairs)
    want_out, want_lse = contract.reference(q, k_cache, table, seqlens, causal)
    contract.compare(out, lse, want_out, want_lse)
