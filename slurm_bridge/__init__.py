"""slurm_bridge package."""
