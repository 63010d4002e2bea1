flow named-arguments
  hits = grep(pattern: "ERROR", glob: "*.log", max_results: 50)
  page = read({path: "large.txt", limit: 100, offset: 200})
  src = read("README.md")
  return src
