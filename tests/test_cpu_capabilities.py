"""`make test-cpus` simulates the CPUs it says it does."""

import cpu_capabilities as caps


def test_each_listed_setting_selects_a_narrower_capability_than_the_native_one():
    native = caps.capability()
    lines = caps.others()  # each checked in a new process to select the capability it names
    names = []
    for line in lines:
        env = dict(item.split("=", 1) for item in line.split())
        names.append(env["ATEN_CPU_CAPABILITY"])
        assert caps.CAPABILITIES[names[-1]] == env, "a line sets PyTorch, MKL and oneDNN together"
    assert native not in names, "the machine's own capability is what `make test` already runs"
    assert len(set(names)) == len(names)
    if native == "avx512":  # an AVX-512 machine can also run the generic and AVX2 kernels
        assert names == ["default", "avx2"]
