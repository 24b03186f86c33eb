import dataclasses, importlib.util, sys
sys.path.insert(0, "/work/main/src")
from quickmoe.kernels import moe_configs as new
spec = importlib.util.spec_from_file_location("old_moe_configs", "/tmp/s7/old/src/quickmoe/kernels/moe_configs.py")
old = importlib.util.module_from_spec(spec); sys.modules["old_moe_configs"] = old; spec.loader.exec_module(old)
models = {"gpt-oss-20b": (32, 2880, 2880, "mxfp4"), "gpt-oss-120b": (128, 2880, 2880, "mxfp4"),
          "qwen3": (128, 2048, 768, None), "mixtral": (8, 4096, 14336, None)}
devices = [("NVIDIA H100 80GB HBM3", "sm_90"), ("NVIDIA H200", "sm_90"), ("NVIDIA H100 PCIe", "sm_90"), ("other", "sm_100")]
checked = differ = 0
for name, (E, H, I, fmt) in models.items():
    for weights in ([fmt] if fmt else ["dense", "fp8", "nvfp4"]):
        for tp in (1, 2, 4, 8):
            for ep in (False, True):
                e = E // tp if ep else E
                i = I if ep else I // tp
                for proj, n, k in (("gate_up", 2 * i, H), ("down", H, i)):
                    for dev, arch in devices:
                        for t in list(range(1, 1100, 7)) + [2048, 4096, 8192, 9000]:
                            a = old.moe_kernel_config(e, n, k, weights, dev, t, arch=arch)
                            b = new.moe_kernel_config(e, n, k, weights, dev, t, arch=arch, proj=proj)
                            a_cmp = dataclasses.asdict(a); b_cmp = dataclasses.asdict(b)
                            a_cmp.pop("register_operand"); b_cmp.pop("register_operand")
                            checked += 1
                            if a_cmp != b_cmp or (a.register_operand != b.register_operand and not (
                                    proj == "gate_up" and tp == 2 and not ep and fmt == "mxfp4")):
                                differ += 1
                                if differ < 10:
                                    print("DIFF", name, weights, tp, ep, proj, dev, t, a, b)
print("checked", checked, "differ", differ)
