flow read-sources(files: List<String>)
  each f in files -> contents
    read(f)
  return contents
