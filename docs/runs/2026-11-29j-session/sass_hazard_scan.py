"""Writes to HGMMA A-operand registers while HGMMA groups of the previous iteration may be pending."""
import re, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if re.match(r"^\.L_x_\d+:", l))
name = lines[start].rstrip(":")
end = next(i for i in range(start, len(lines)) if f"`({name})" in lines[i])
loop = lines[start:end + 1]
ins = []
for l in loop:
    m = re.search(r"\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?);", l)
    if m:
        ins.append((m.group(2), m.group(3)))
# A registers of each HGMMA (second operand, 4 regs from it)
groups, cur = [], []
for op, args in ins:
    if op.startswith("HGMMA"):
        a = args.split(",")[1].strip()
        if re.match(r"R\d+$", a):
            cur += list(range(int(a[1:]), int(a[1:]) + 4))
        if "gsb0" in args:
            groups.append(set(cur)); cur = []
print("groups per iteration:", len(groups), "A regs per group:", [sorted(g)[:1] + sorted(g)[-1:] for g in groups])
# last wait in the loop: how many groups may remain pending at the back edge
waits = [int(args.split(",")[-1], 16) for op, args in ins if op.startswith("WARPGROUP.DEPBAR")]
pending_n = waits[-1] if waits else 0
pending = set().union(*groups[len(groups) - pending_n:]) if pending_n else set()
print("pending groups at the back edge:", pending_n)
hazards = []
for op, args in ins:
    if op.startswith("WARPGROUP.DEPBAR"):
        n = int(args.split(",")[-1], 16)
        break  # a wait at the top: stop (conservative)
    dst = args.split(",")[0].strip()
    m = re.match(r"R(\d+)$", dst)
    if m:
        width = 4 if op.startswith(("LDS.128", "LDSM.16.M88.4")) else 2 if ".64" in op else 1
        regs = set(range(int(m.group(1)), int(m.group(1)) + width))
        if regs & pending:
            hazards.append(f"{op} {dst}")
print("writes to pending A registers before the first wait of the next iteration:", len(hazards), hazards[:6])
