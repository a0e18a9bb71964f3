"""What each PIM term of issue 15 buys: the hbm-pim-gpu preset with each term switched off.

Terms: the host softmax's round trip over the PIM dies' external links
(`pim.softmax_in_memory`), PIM and host work in sequence within a layer
(`pim.pipelined`; it only helps where PIM has channels of its own,
`pim.serial_with_dram = 0`), and the PIM ALUs' own energy per FLOP (`pim.energy_pj_per_flop`,
against pricing PIM FLOPs at the host's energy as the model did before). Each row is
one workload; each column the preset with one term changed (and `h100-sxm`, the same
compute die without PIM).

    python benchmarks/pim_ablation.py
"""

from __future__ import annotations

import costmodel as cm


WORKLOADS = (("llama-3-8b", 8, 32768), ("llama-3-8b", 64, 8192), ("llama-3-70b", 16, 32768))


def variants(chip: cm.Chip) -> dict[str, cm.Chip]:
    host_flop = chip.energy_per_flop[1]
    return {
        "preset": chip,
        "softmax in memory": chip.replace(pim_softmax=1.0),
        "pipelined": chip.replace(pim_pipelined=1.0),
        "own channels (NeuPIMs' dual row buffers), in sequence": chip.replace(pim_serial=0.0),
        "own channels, pipelined": chip.replace(pim_serial=0.0, pim_pipelined=1.0),
        "PIM FLOPs at host J": chip.replace(pim_energy_per_flop=host_flop),
        "before (all three)": chip.replace(pim_softmax=1.0, pim_pipelined=1.0, pim_energy_per_flop=host_flop),
    }


def main() -> None:
    print("| workload | chip | ms/step | J/token |")
    print("|---|---|---|---|")
    for model, batch, context in WORKLOADS:
        e = cm.evaluate(model, "hbm-pim-gpu", batch=batch, context=context)
        for name, chip in variants(e.chip).items():
            cost = cm.decode_cost(e.workload, chip, e.placement)
            ms, j = 1e3 * float(cost.seconds_per_step), float(cost.joules_per_token)
            print(f"| {model} b{batch} {context // 1024}k | hbm-pim-gpu, {name} | {ms:.2f} | {j:.3f} |")
        h = cm.evaluate(model, "h100-sxm", batch=batch, context=context, chips=int(e.chip.tensor_parallel))
        ms, j = 1e3 * float(h.cost.seconds_per_step), float(h.cost.joules_per_token)
        print(f"| {model} b{batch} {context // 1024}k | h100-sxm x{int(e.chip.tensor_parallel)} | {ms:.2f} | {j:.3f} |")


if __name__ == "__main__":
    main()
