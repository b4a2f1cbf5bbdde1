"""The launcher: one topology file (``topology``), resolved into commands (``plan``) and run by a
backend (``local``: processes on this machine; ``slurm``: an sbatch script; ``ray``: supervised processes in
Ray actors on an existing cluster). ``atropos-launch`` (``atroposlib.cli.launch``) is its command line."""
