"""Cycle step 5, adopt: held plain sbatch jobs in managed partitions become metasched jobs (``adopter.py``).

``spec.py`` writes an adopted job's metasched spec from what Slurm stores about it; step 13
(actuate) releases the placed ones instead of calling sbatch.
"""
