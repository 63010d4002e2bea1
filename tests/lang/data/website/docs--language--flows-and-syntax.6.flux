flow read-notes
  result = read("some/file.txt")   # bind: result now holds the file contents
  return result                    # reference
