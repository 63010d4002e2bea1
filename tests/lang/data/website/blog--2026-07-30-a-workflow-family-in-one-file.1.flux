flow status -> Any
  state = git_status()
  recent = git_log(limit: 5)
  return { state, recent }

flow start(branch: String) -> Any
  switched = git_checkout(branch: branch, create: true)
  return { switched }

flow save(message: String) -> Any
  git_stage(paths: ["."])
  committed = git_commit(message: message)
  return { committed }

flow land(onto: String, branch: String) -> Any
  git_checkout(branch: onto)
  merged = git_merge(branch: branch, no_ff: true)
  return { merged }

flow undo(commit: String) -> Any
  reverted = git_revert(commit: commit, mainline: 1)
  return { reverted }
