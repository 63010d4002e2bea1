flow todo-scan
  readme = read("README.md")
  hits = grep(glob: "*.rs", max_results: 50, pattern: "TODO")
  return hits
