"""cli.sbatch: the sbatch emulation (msbatch), its squeue and scancel (msqueue, mscancel); standard library and click only."""
