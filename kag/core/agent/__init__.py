"""One agent episode: workspace, sandbox, tools, policy, the evaluation bridge and the trajectory."""
