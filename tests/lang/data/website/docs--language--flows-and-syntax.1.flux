# single-flow file
flow check-readme
  $content = read("README.md")
  return $content
