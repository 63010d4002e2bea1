flow repo-survey
  parallel
    branch readme
      readme = read("README.md")
    branch todos
      todos = grep(glob: "*.rs", max_results: 100, pattern: "TODO")
    branch status
      status = git_status()
  ctx pack
    purpose "assess repository state"
    budget 8000
    include readme, todos, status
  assessment = ai.reason(ask: "What needs attention first?", ctx: pack)
  return { assessment, todos }
