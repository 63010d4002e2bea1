flow survey
  parallel
    branch readme
      readme = read("README.md")
    branch todos
      todos = grep(glob: "*.rs", pattern: "TODO")
  return { readme, todos }
