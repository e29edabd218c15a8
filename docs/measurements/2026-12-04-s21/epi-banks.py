#!/usr/bin/env python3
"""Shared-memory passes of the epilogue's staged fp32 tile, old layout against
session 21's (templates/gemm_tile.cuh: epi_pitch, epi_at), by the bank model:
32 banks of 4 bytes; a warp's 4-byte accesses are served together, 8-byte ones
per half warp, 16-byte ones per quarter warp; a group takes as many passes as
the most distinct words any one bank holds. Printed: the worst passes per
group over the tile shapes the templates offer (1 = conflict free).

Access patterns (fragment layout of gemm_tile.cuh's file comment):
  stage    stage_fragments / stage_chunk: lane L of the warp at grid (wm, wn)
           writes row wm*WM + 16i + L/4 + 8h, columns wn*WN + 8j + 2(L%4) + {0,1}
           (old: two 4-byte stores; new: one 8-byte store)
  swapped  stage_tile with SWAP: row 8j + 2(L%4) + c, column 16w + L/4 + 8h (4 bytes)
  read     write_tile: thread c reads row c / OC, columns (c % OC) * 8 .. + 7 as
           two 16-byte loads (fused: also the up half BN/2 further); OC = output
           columns / 8
"""
import itertools

def passes(lanes):
    size = lanes[0][1]
    group = {4: 32, 8: 16, 16: 8}[size]
    total = 0
    for g in range(0, 32, group):
        banks = {}
        for addr, s in lanes[g:g + group]:
            if addr is None:
                continue
            for w in range(addr // 4, (addr + s) // 4):
                banks.setdefault(w % 32, set()).add(w)
        total += max((len(v) for v in banks.values()), default=0)
    return total / (32 // group)

def old_at(r, col, bn):
    return 4 * (r * (bn + 4) + col)

def new_at(r, col, bn):
    swap = (r ^ (col >> 5)) & 1
    return 4 * (r * (bn + 8) + col + swap * (4 - ((col & 4) << 1)))

def next_at(r, col, bn):
    # Not shipped: also trading the 32-byte halves of each 16 columns where
    # row / 4 is odd, in the same additive form (register-neutral by ptxas on
    # five stored kernels; not run on the GPU).
    swap = (r ^ (col >> 5)) & 1
    swap8 = (r >> 2) & 1
    return 4 * (r * (bn + 8) + col + swap * (4 - ((col & 4) << 1)) + swap8 * (8 - ((col & 8) << 1)))

def stage(at, bm, bn, wgrid, vec):
    wm_n, wn_n = wgrid
    WM, WN = bm // wm_n, bn // wn_n
    worst = 0
    for wm, wn, i, h, j in itertools.product(range(wm_n), range(wn_n), range(WM // 16), range(2), range(WN // 8)):
        row = lambda L: wm * WM + i * 16 + L // 4 + 8 * h
        col = lambda L: wn * WN + j * 8 + 2 * (L % 4)
        if vec:
            worst = max(worst, passes([(at(row(L), col(L), bn), 8) for L in range(32)]))
        else:
            for c in range(2):
                worst = max(worst, passes([(at(row(L), col(L) + c, bn), 4) for L in range(32)]))
    return worst

def swapped(at, bm, bn):
    worst = 0
    for w, h, j, c in itertools.product(range(bn // 16), range(2), range(bm // 8), range(2)):
        worst = max(worst, passes([(at(j * 8 + 2 * (L % 4) + c, w * 16 + L // 4 + 8 * h, bn), 4) for L in range(32)]))
    return worst

def read(at, bm, bn, fused):
    oc = (bn // 2 if fused else bn) // 8
    worst = 0
    for base in range(0, bm * oc, 32):
        for part in ([0, 4, bn // 2, bn // 2 + 4] if fused else [0, 4]):
            lanes = []
            for t in range(32):
                r, cc = divmod(base + t, oc)
                lanes.append((at(r, cc * 8 + part, bn), 16) if r < bm else (None, 16))
            worst = max(worst, passes(lanes))
    return worst

for name, at, vec in (("old (pitch +4, two 4-byte stores)", old_at, False),
                      ("new (pitch +8, halves traded, 8-byte stores)", new_at, True),
                      ("not shipped (new, and 32-byte halves traded on odd row / 4)", next_at, True)):
    w = {"stage": 0, "swapped": 0, "read": 0, "read fused": 0}
    for bm in (16, 32, 64, 128):
        for bn in (32, 64, 128, 192, 256):
            for g in ((bm // 16, 1), (1, 4), (2, 2), (1, 2), (2, 1), (4, 1), (1, 1)):
                if bm % (16 * g[0]) == 0 and bn % (8 * g[1]) == 0:
                    w["stage"] = max(w["stage"], stage(at, bm, bn, g, vec))
            w["swapped"] = max(w["swapped"], swapped(at, bm, bn))
            w["read"] = max(w["read"], read(at, bm, bn, False))
            w["read fused"] = max(w["read fused"], read(at, bm, bn, True))
    print(f"{name}: worst passes per group " + ", ".join(f"{k} {v:g}" for k, v in w.items()))
