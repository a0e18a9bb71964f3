"""Layer 3: what the tool writes down. Records (JSON-ready dicts), plots, provenance and
the main job, as library functions: no argparse, no printing to a console.

- `records`: `cost_record`, `si`, `headline`, `dumps`;
- `provenance`: what an output was made from (versions, input hashes);
- `roofline`, `parity`, `codesign`, `presets`, `sweep_plots`: the figures (matplotlib
  is imported inside the plotting functions only);
- `codesign`: the co-design record (`codesign_report`);
- `main_job`: `run_main_job`, the whole pipeline on the shipped defaults.
"""

from .records import cost_record as cost_record, dumps as dumps, headline as headline, si as si
