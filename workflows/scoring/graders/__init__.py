"""One module per family of graders; `workflows.scoring.registry` maps each GraderKind to one."""
