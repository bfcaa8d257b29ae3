"""Sources: papers, docs and web pages under raw/sources/ as cited source pages with their measured claims."""
