"""Pure parsers of Slurm CLI output: text in, typed frozen records out."""
