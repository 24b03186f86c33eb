"""Paged prefill attention (several new tokens per sequence, chunked prefill over cached context):
`paged_prefill_attention` (Triton) beside `paged_prefill_attention_ref` (torch), same signature.

q [T, H, D] packs each sequence's new tokens (sequence b: rows cu_query_lens[b] .. cu_query_lens[b+1], the
last ones of its context_lens[b] positions, their K/V already written to the cache). Each query at position
p attends causally to the cache (keys j <= p, with a window W > 0 only j > p - W), GQA, and the head's sink
logit joins the softmax denominator only (see kernels/decode_attention.py for the formula).

The kernel: grid (KV heads, flat query tiles), every sequence's query tiles numbered one after the other and
each program finding its (sequence, tile) from the lengths on the device (so the grid depends on the token and
sequence counts only: a CUDA graph of a bucket serves every step that fits it), the last tiles (a sequence's last
ones read the most keys) launched first, or (flat tiles, KV heads) in order. A query tile is BLOCK_Q consecutive
positions starting at a multiple of BLOCK_Q (a chunk that starts inside one leaves its first rows empty), so the
tiles a row's keys are grouped in never depend on how its prompt was chunked. A program takes its tile's queries
of the group's H / KV heads together (BLOCK_Q x GROUP rows: tensor-core tiles) and iterates over BLOCK_N keys
at a time, gathered across cache blocks through the block table, from the first key any of its positions sees
(the window) to its last query's position (causal), with an online softmax seeded with the sink. The tiles after
the sequences' zero the rows after the last sequence's, where a CUDA graph of a padded step has them
(executor/prefill_graphs.py); the reference leaves them zero too.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.paged_kv_tile import kv_cache_head_major

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None
else:
    from quickmoe.kernels.paged_kv_tile import load_kv_tile, pv_dot, qk_dot

__all__ = ["paged_prefill_attention", "paged_prefill_attention_ref", "prefill_launch"]



def paged_prefill_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                block_tables: torch.Tensor, cu_query_lens: torch.Tensor, context_lens: torch.Tensor,
                                sinks: torch.Tensor, window: int, scale: float) -> torch.Tensor:
    """Per sequence, in float32: its keys gathered from the block table, the definition applied per query."""
    num_heads, num_kv = q.shape[1], k_cache.shape[2]
    block_size = k_cache.shape[1]
    out = torch.zeros_like(q)  # rows after the last sequence's (a captured step's padding) stay zero
    starts = cu_query_lens.tolist()
    for b, ctx in enumerate(context_lens.tolist()):
        rows = slice(starts[b], starts[b + 1])
        n = starts[b + 1] - starts[b]
        if n == 0:
            continue
        first = max(ctx - n - window + 1, 0) if window > 0 else 0  # keys before it are outside every query's window
        key_pos = torch.arange(first, ctx, device=q.device)  # [L]
        blocks = block_tables[b, key_pos // block_size].clamp(min=0).long()  # released (-1) blocks: masked below
        k = k_cache[blocks, key_pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)  # [L, H, D]
        v = v_cache[blocks, key_pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)
        q_pos = torch.arange(ctx - n, ctx, device=q.device)  # [n]
        visible = key_pos[None, :] <= q_pos[:, None]  # [n, L]
        if window > 0:
            visible &= key_pos[None, :] > q_pos[:, None] - window
        logits = torch.einsum("nhd,lhd->hnl", q[rows].float(), k) * scale  # [H, n, L]
        logits = logits.masked_fill(~visible[None], float("-inf"))
        combined = torch.cat([logits, sinks.float()[:, None, None].expand(-1, n, 1)], dim=2)
        probs = torch.softmax(combined, dim=2)[..., :-1]
        out[rows] = torch.einsum("hnl,lhd->nhd", probs, v).to(q.dtype)
    return out


def prefill_launch(group: int, window: int = 0) -> tuple[int, int, int, int | None]:
    """(queries a program, warps, stages, register cap a thread or None) of the prefill launch for GQA groups of `group`
    query heads (measured with heads 64 and 128 wide: the rule is the same for both) in a layer with a sliding
    `window` (0: full). Warps, stages and the cap change no result bit; the queries a program place the query tiles
    (a windowed layer's key tiles follow them), fixed for every batch.

    Groups up to 8 take tiles of 128 rows (queries x the group rounded up to a power of two: 16 x 8 for gpt-oss and
    Qwen3-30B-A3B, 32 x 4 for Mixtral) on 8 warps, 2 stages, at most 128 registers a thread (ptxas's `maxnreg`), so
    two programs of 8 warps share a multiprocessor. Uncapped, gpt-oss's kernel took 154 registers on 8 warps (one
    program an SM) and 254 on 4 (two programs of 4 warps); Qwen3's spilled 664 bytes on 4 warps. On the H200
    (2026-12-01 third session, `scripts/probes/prefill_attention_sweep.py`, whole prompts of 1 x 1,024 to 1 x 8,192
    and 16 x 512, full and 128-key windows), by geometric mean of the time of the launch before (16 queries, 4 warps,
    4 stages, uncapped; Mixtral 2 stages): gpt-oss 0.90 (1 x 8,192 1.51 against 1.62 ms), Qwen3 0.43 (1.51 against
    3.16 ms), Mixtral 0.88 (1.32 against 1.71 ms; 1 x 1,024 44 against 39 us); 8 warps uncapped 1.33, 0.46 and
    1.02. Groups of 1-2 (no model served has them) take the same 128 rows, not measured; groups of 16 or more
    (not measured) keep the launch before.

    A sliding layer's query tile reads its window's two or three key tiles, too few to fill a pipeline: one stage.
    On the H200 (2026-12-01 fourth session, the sweep's 128-key windows at 1 x 8,192 and 4 x 2,048) one stage took
    130.8 and 128.1 us against 139.5 and 136.6 with two (gpt-oss), 118.5 and 115.0 against 128.1 and 124.7 (Qwen3's
    heads), 120.6 and 117.8 against 129.6 and 127.2 (Mixtral's); full layers keep two (1 x 8,192: 1,453 against
    1,610 us, gpt-oss)."""
    group_pow2 = 1 << max(group - 1, 0).bit_length()
    if group_pow2 <= 8:
        return 128 // group_pow2, 8, 1 if window > 0 else 2, 128
    return 16, 4, 4, None


def paged_prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, cu_query_lens: torch.Tensor, context_lens: torch.Tensor,
                            sinks: torch.Tensor, window: int, scale: float, block_q: int | None = None,
                            block_n: int = 64, num_warps: int | None = None, num_stages: int | None = None,
                            longest_first: bool = True, maxnreg: int | None = None,
                            diagonal_in_loop: bool | None = None) -> torch.Tensor:
    """`paged_prefill_attention_ref` in one Triton launch (see the module docstring). The grid is sized by the token
    and sequence counts (q's rows, context_lens' length). The launch config (block_q queries x the GQA group a program,
    block_n keys a step, warps, stages, register cap, the grid's order) is fixed for every batch, so a sequence's
    result never depends on what it is batched with. block_n groups the online softmax (a different block_n rounds
    differently); warps, stages, the register cap and the grid's order change no bit. What is left None is
    `prefill_launch`'s, and its register cap with its warps (`maxnreg` None with warps given: no cap).
    `diagonal_in_loop` (None: heads up to 64 wide) takes the diagonal's key tiles in the whole tiles' loop (the
    kernel's comment); it changes no bit either.

    64 keys a step: 32 measured 19% faster on the H100 but regrouped the softmax, and the bf16 batch-invariance test
    then agreed on 97.4% of greedy tokens (bar 99%; 2026-11-27 third session). The softmax step scales the logits in
    the FMA that subtracts the running max (one rounding, no separate multiply; the whole-tile key loop 768 -> 614
    SASS instructions a thread a step), with the query tiles on multiples of block_q (module docstring) and the keys
    before a chunk's first window masked: on the H200 1 x 8,192 took 1.63 against 1.80 ms (2026-11-30 eighteenth
    session). `longest_first` (the grid's order, module docstring): a causal prompt's query tiles read from one to
    all of its key tiles, and a grid launched in order leaves its longest programs for last; launched first, on the
    H200, 1 x 1,024 took 0.043 against 0.059 ms, 1 x 8,192 1.80 against 1.88 (`bench attention`)."""
    if triton is None:
        raise RuntimeError("paged_prefill_attention needs triton; paged_prefill_attention_ref is the torch version")
    num_tokens, num_heads, head_dim = q.shape
    _, block_size, num_kv, _ = k_cache.shape
    group = num_heads // num_kv
    out = torch.empty_like(q)
    batch = context_lens.shape[0]
    if num_tokens == 0 or batch == 0:
        return out
    rule_block_q, rule_warps, rule_stages, rule_maxnreg = prefill_launch(group, window)
    block_q = rule_block_q if block_q is None else block_q
    num_stages = rule_stages if num_stages is None else num_stages
    if num_warps is None:
        num_warps, maxnreg = rule_warps, rule_maxnreg if maxnreg is None else maxnreg
    group_pow2 = triton.next_power_of_2(group)
    block_q = max(block_q, 16 // group_pow2 if group_pow2 < 16 else 1)  # the dot needs >= 16 rows
    fp32_dot = q.device.type == "cpu" or k_cache.dtype == torch.float32  # the interpreter's bf16 dot is wrong
    # every sequence's query tiles one after the other (n // block_q + 2 indices for n new tokens: its tiles lie on
    # multiples of block_q), then the tiles of the rows after the last sequence's (zeroed), whatever the lengths on
    # the device are (_flat_tile)
    tiles = triton.cdiv(num_tokens, block_q) + 2 * batch + 1
    _prefill_kernel[(num_kv, tiles) if longest_first else (tiles, num_kv)](
        q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks, out, q.stride(0), q.stride(1),
        out.stride(0), out.stride(1), block_tables.stride(0), batch, num_tokens, window,
        float(scale) * 1.4426950408889634,
        GROUP=group, GROUP_POW2=group_pow2, D=head_dim, D_POW2=max(16, triton.next_power_of_2(head_dim)),
        BLOCK_SIZE=block_size, KV=num_kv, HEAD_MAJOR=kv_cache_head_major(k_cache, v_cache), BLOCK_Q=block_q,
        BLOCK_N=block_n, FP32_DOT=fp32_dot, LONGEST_FIRST=longest_first,
        DIAGONAL_IN_LOOP=head_dim <= 64 if diagonal_in_loop is None else diagonal_in_loop,
        num_warps=num_warps, num_stages=num_stages, **({"maxnreg": maxnreg} if maxnreg else {}))
    return out


if triton is not None:
    SEARCH = tl.constexpr(128)  # sequences a program reads at a time to find its tile (_flat_tile)

    @triton.jit
    def _mask_logits(s, q_pos, k_pos, window):
        """s [R, N] with -inf where a row does not see a key: a row sees key k iff 0 <= q_pos - k < window (no upper
        bound without a window), one unsigned compare a logit. For a valid row it implies the tile's key_ok
        (k <= q_pos <= last_pos; k > q_pos - window >= key_lo - 1); the other rows' results are never stored."""
        behind = q_pos[:, None] - k_pos[None, :]  # [R, N]
        behind = behind.to(tl.uint32, bitcast=True)
        span = tl.where(window > 0, window, 0x7FFFFFFF).to(tl.uint32)
        return tl.where(behind < span, s, float("-inf"))

    @triton.jit
    def _prefill_tile(q, m, l_sum, acc, start, q_pos, key_lo, last_pos, window, qk_scale, k_cache_ptr, v_cache_ptr,
                      block_tables_ptr, row_offset, kv_head, dims, dim_ok, diagonal, BLOCK_SIZE: tl.constexpr,
                      KV: tl.constexpr, D: tl.constexpr, HEAD_MAJOR: tl.constexpr, BLOCK_N: tl.constexpr,
                      FP32_DOT: tl.constexpr, MASKED: tl.constexpr):
        """One step of the online softmax over keys [start, start + BLOCK_N): returns (m, l_sum, acc). MASKED: the
        causal and window masks applied per (row, key) (`diagonal`, a runtime flag: applied where it is true); else
        the caller knows every row sees every key. Keys before key_lo (the first one a valid row of the tile sees)
        are neither read nor visible: their blocks may be released. The mask is one unsigned compare a logit in 32
        bits: with the engine's int64 context lengths the masked step had been 977 SASS instructions a thread (64-bit
        compares, three masks ANDed, 72 bytes of stack) against the whole step's 331; now 509 against 330, no stack
        (2026-12-01 fourth session)."""
        k_pos = start + tl.arange(0, BLOCK_N)  # [N]
        key_ok = k_pos <= last_pos
        if MASKED:
            key_ok &= k_pos >= key_lo
        k, v = load_kv_tile(k_cache_ptr, v_cache_ptr, block_tables_ptr, row_offset, k_pos, key_ok, kv_head, dims,
                            dim_ok, BLOCK_SIZE, KV, D, HEAD_MAJOR)  # [N, D] each
        s = qk_dot(q, k, FP32_DOT)  # [R, N] float32, unscaled
        if MASKED:
            s = _mask_logits(s, q_pos, k_pos, window)
        else:
            if diagonal:  # a runtime branch: the whole tiles' loop takes its diagonal tiles too
                s = _mask_logits(s, q_pos, k_pos, window)
        # the scale once per row for the max (rounding is monotonic: the max of the scaled logits, bit for bit), and
        # in one explicit FMA with the max's subtraction per logit, the same instructions in masked and whole tiles
        # (a row's bits never depend on which kind its keys fall in: chunked or whole prompts)
        m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)  # finite: the sink is in it
        p = tl.exp2(tl.fma(s, qk_scale, -m_new[:, None]))  # [R, N]; 0 where masked (-inf)
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + pv_dot(p, v, FP32_DOT)
        return m_new, l_sum, acc

    @triton.jit
    def _flat_tile(cu_q_ptr, num_seqs, flat, BLOCK_Q: tl.constexpr):
        """(sequence, its query tile) of flat index `flat`. Sequence b owns the indices [s_b, s_(b+1)) with s_b =
        cu_q[b] // BLOCK_Q + 2 b: at least its tiles, ceil((n_b + lead_b) / BLOCK_Q) <= n_b // BLOCK_Q + 2 (its first
        tile starts lead_b = (context_b - n_b) mod BLOCK_Q rows before its first new token); the indices past
        s_(num_seqs) are the tiles of the rows after the last sequence's (returned as sequence num_seqs). Only
        cu_q is read, SEARCH sequences at a time, and no running sum is needed: s_b grows with b, so b is the number of
        starts <= flat, less one. So a CUDA graph's grid serves every step of its bucket, and no program waits for a
        sequence it does not have (a grid of sequences x the longest's tiles is mostly empty at hundreds of them)."""
        count = tl.full([], 0, tl.int32)  # sequences (the rows after them counted as one more) starting at or before
        for first in range(0, num_seqs + 1, SEARCH):
            idx = first + tl.arange(0, SEARCH)
            ok = idx <= num_seqs
            starts = tl.load(cu_q_ptr + idx, mask=ok, other=0) // BLOCK_Q + 2 * idx  # [SEARCH]
            count += tl.sum((ok & (starts <= flat)).to(tl.int32), 0)
        seq = count - 1  # s_0 = 0 <= flat
        return seq, flat - (tl.load(cu_q_ptr + seq) // BLOCK_Q + 2 * seq)

    @triton.jit
    def _zero_rows(out_ptr, cu_q_ptr, num_seqs, num_tokens, q_tile, kv_head, stride_ot, stride_oh,
                   GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                   BLOCK_Q: tl.constexpr):
        """Zeros into rows [cu_q[num_seqs], num_tokens) of `out`, query tile q_tile's BLOCK_Q of them, the heads of
        KV head kv_head: rows that belong to no sequence (a CUDA graph's padding, executor/prefill_graphs.py) must
        not hold whatever the memory held, which the layers after would read."""
        first = tl.load(cu_q_ptr + num_seqs) + q_tile * BLOCK_Q
        if first < num_tokens:  # (the grid's bound leaves most of these programs nothing to do)
            r = tl.arange(0, BLOCK_Q * GROUP_POW2)
            row = first + r // GROUP_POW2  # [R]
            g = r % GROUP_POW2
            dims = tl.arange(0, D_POW2)
            ok = ((row < num_tokens) & (g < GROUP))[:, None] & (dims < D)[None, :]
            offsets = row[:, None].to(tl.int64) * stride_ot + (kv_head * GROUP + g)[:, None] * stride_oh + dims[None, :]
            tl.store(out_ptr + offsets, tl.zeros([BLOCK_Q * GROUP_POW2, D_POW2], out_ptr.dtype.element_ty), mask=ok)

    # the block tables' width (stride_bt) follows the step's longest sequence: not specialized (its value being 1 or
    # a multiple of 16 made new variants, compiled in the middle of serving: 1.3 s in a mixed step on the H100)
    @triton.jit(do_not_specialize=["stride_bt", "num_seqs", "num_tokens"])
    def _prefill_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, cu_q_ptr, context_lens_ptr, sinks_ptr,
                        out_ptr, stride_qt, stride_qh, stride_ot, stride_oh, stride_bt, num_seqs, num_tokens, window,
                        qk_scale,
                        GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, HEAD_MAJOR: tl.constexpr, BLOCK_Q: tl.constexpr,
                        BLOCK_N: tl.constexpr, FP32_DOT: tl.constexpr, LONGEST_FIRST: tl.constexpr,
                        DIAGONAL_IN_LOOP: tl.constexpr):
        if LONGEST_FIRST:  # the flat tiles from the last: a sequence's last tiles read the most keys
            kv_head = tl.program_id(0)
            flat = tl.num_programs(1) - 1 - tl.program_id(1)
        else:
            flat = tl.program_id(0)
            kv_head = tl.program_id(1)
        seq, q_tile = _flat_tile(cu_q_ptr, num_seqs, flat, BLOCK_Q)
        if seq == num_seqs:  # past every sequence's tiles: q_tile-th tile of the rows after the last sequence's
            _zero_rows(out_ptr, cu_q_ptr, num_seqs, num_tokens, q_tile, kv_head, stride_ot, stride_oh, GROUP,
                       GROUP_POW2, D, D_POW2, BLOCK_Q)
        seq_read = tl.minimum(seq, num_seqs - 1)  # (a tile past them reads the last sequence's lengths, unused)
        q_start = tl.load(cu_q_ptr + seq_read)
        n = tl.load(cu_q_ptr + seq_read + 1) - q_start
        ctx = tl.load(context_lens_ptr + seq_read).to(tl.int32)  # positions in 32 bits (int64 lens: 64-bit masks)
        q_base = ctx - n  # absolute position of the sequence's first new query
        # query tiles lie on absolute multiples of BLOCK_Q (the first one may start before q_base), so a row's
        # tile, and with it the key tiles it meets and how, is the same however its prompt was chunked
        q_lead = q_base % BLOCK_Q
        if (seq < num_seqs) & (q_tile * BLOCK_Q - q_lead < n):
            r = tl.arange(0, BLOCK_Q * GROUP_POW2)  # rows: query i = r // GROUP_POW2, head g = r % GROUP_POW2
            i = q_tile * BLOCK_Q - q_lead + r // GROUP_POW2  # [R] index among the sequence's new tokens
            g = r % GROUP_POW2
            row_ok = (i >= 0) & (i < n) & (g < GROUP)
            head = kv_head * GROUP + g
            q_pos = q_base + i  # [R] absolute position of each row's query
            dims = tl.arange(0, D_POW2)
            dim_ok = dims < D
            q_offsets = (q_start + i)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :]
            q = tl.load(q_ptr + q_offsets, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)  # [R, D]
            if FP32_DOT:
                q = q.to(tl.float32)
            q_first = q_base - q_lead + q_tile * BLOCK_Q  # the tile's first position (a multiple of BLOCK_Q)
            last_pos = q_base + tl.minimum(q_tile * BLOCK_Q - q_lead + BLOCK_Q, n) - 1  # the tile's last query
            first_pos = tl.where(window > 0, tl.maximum(q_first - window + 1, 0), 0)
            # the first key a valid row sees: before it a released block (-1) may stand where the tile's first
            # position, before the chunk, would look (masked tiles only: whole tiles start after it)
            key_lo = tl.where(window > 0, tl.maximum(tl.maximum(q_first, q_base) - window + 1, 0), 0)
            # base-2 online softmax seeded with the sink: its logit is in the max and the sum, its value is 0
            m = tl.load(sinks_ptr + head, mask=row_ok, other=0.0).to(tl.float32) * 1.4426950408889634  # [R]
            l_sum = tl.full([BLOCK_Q * GROUP_POW2], 1.0, tl.float32)
            acc = tl.zeros([BLOCK_Q * GROUP_POW2, D_POW2], tl.float32)
            # the key tiles in order, in three runs: masked tiles at a window's start, whole tiles (every row sees
            # every key: at or before the tile's first position and, with a window, after its last position's
            # window start), masked tiles at the diagonal. The runs' bounds depend on the tile's positions only (the
            # whole tile's, where a chunk ends inside it); key tiles after a row's position are all masked for it
            # and leave its m, l_sum and acc as they were. Heads up to 64 wide (DIAGONAL_IN_LOOP) take the diagonal's
            # tiles in the whole tiles' loop, masked behind a runtime branch: their K and V come through that loop's
            # pipeline instead of a loop of one or two steps with its own prologue (829 SASS instructions a thread for
            # one 64-key step against 443 in the loop). On the H200 (2026-12-01 fourth session, gpt-oss heads)
            # 16 x 512 took 158 against 170 us, 4 x 2,048 411 against 424; with Qwen3's and Mixtral's heads of 128
            # (their loop spills under the register cap) long prompts read 2-3% slower, short ones 3-5% faster, so
            # they keep the separate loop.
            tiles = tl.cdiv(last_pos + 1 - first_pos, BLOCK_N)
            whole_from = tl.where(window > 0, tl.cdiv(tl.maximum(q_first + BLOCK_Q - window - first_pos, 0), BLOCK_N),
                                  0)
            whole_to = tl.maximum(tl.minimum(tl.where(q_first - (BLOCK_N - 1) >= first_pos,
                                                      (q_first - (BLOCK_N - 1) - first_pos) // BLOCK_N + 1, 0),
                                             tiles), whole_from)
            whole_from = tl.minimum(whole_from, whole_to)
            for t in range(0, whole_from):
                m, l_sum, acc = _prefill_tile(q, m, l_sum, acc, first_pos + t * BLOCK_N, q_pos, key_lo, last_pos,
                                              window, qk_scale, k_cache_ptr, v_cache_ptr, block_tables_ptr,
                                              seq * stride_bt, kv_head, dims, dim_ok, True, BLOCK_SIZE, KV, D,
                                              HEAD_MAJOR, BLOCK_N, FP32_DOT, True)
            if DIAGONAL_IN_LOOP:  # the diagonal's tiles (from whole_to) masked behind a runtime branch
                for t in range(whole_from, tiles):
                    m, l_sum, acc = _prefill_tile(q, m, l_sum, acc, first_pos + t * BLOCK_N, q_pos, key_lo, last_pos,
                                                  window, qk_scale, k_cache_ptr, v_cache_ptr, block_tables_ptr,
                                                  seq * stride_bt, kv_head, dims, dim_ok, t >= whole_to, BLOCK_SIZE,
                                                  KV, D, HEAD_MAJOR, BLOCK_N, FP32_DOT, False)
            else:
                for t in range(whole_from, whole_to):
                    m, l_sum, acc = _prefill_tile(q, m, l_sum, acc, first_pos + t * BLOCK_N, q_pos, key_lo, last_pos,
                                                  window, qk_scale, k_cache_ptr, v_cache_ptr, block_tables_ptr,
                                                  seq * stride_bt, kv_head, dims, dim_ok, False, BLOCK_SIZE, KV, D,
                                                  HEAD_MAJOR, BLOCK_N, FP32_DOT, False)
                for t in range(whole_to, tiles):
                    m, l_sum, acc = _prefill_tile(q, m, l_sum, acc, first_pos + t * BLOCK_N, q_pos, key_lo, last_pos,
                                                  window, qk_scale, k_cache_ptr, v_cache_ptr, block_tables_ptr,
                                                  seq * stride_bt, kv_head, dims, dim_ok, True, BLOCK_SIZE, KV, D,
                                                  HEAD_MAJOR, BLOCK_N, FP32_DOT, True)
            result = acc / l_sum[:, None]
            out_offsets = (q_start + i)[:, None].to(tl.int64) * stride_ot + head[:, None] * stride_oh + dims[None, :]
            tl.store(out_ptr + out_offsets, result.to(out_ptr.dtype.element_ty),
                     mask=row_ok[:, None] & dim_ok[None, :])
