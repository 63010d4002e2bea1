flow check-tree
  status = git_status()
  when status
    verdict = fmt("""tree is dirty:
{status}""")
  else
    verdict = "tree is clean"
  return verdict
