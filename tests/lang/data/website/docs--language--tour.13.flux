flow repo-report
  parallel
    branch status
      status = git_status()
    branch log
      log = git_log(limit: 10)
  return { ok: true, recent: log, status }
