"""GPU-host tools (torch and a GPU, no Triton): `tune` writes a dispatch table from measurements of the installed
wheel, `ab` compares two tables or forced variants. The CPU build stages live in build_tools."""
