"""`repro rehearse`: a GPU recipe's flow on a machine without its GPUs, every stand-in labelled as one."""
