flow check-readme
  $src = read("README.md")
  return $src
