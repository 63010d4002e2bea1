flow improve -> EvalReport
  baseline = eval_run(adapter: "local", dir: "suites", trials: 3)
  sessions = eval_sessions(baseline)
  digest = sessions_digest(sessions)
  parallel
    branch mined
      mined = painpoints_collect(sessions)
    branch reviewed
      reviewed = task(role: "reviewer", task: """Review these eval sessions for failure modes.
Sessions:
{digest}

Return ONLY a JSON array of findings.""")
  candidates = improvements_aggregate(mined, reviewed)
  repeat 3, until: done
    tasks = task(role: "planner", task: """Turn these candidates into AT MOST 2 tasks:
{candidates}""")
    snapshot = git_snapshot()
    change_implement(limit: 2, tasks)
    gate = gate_check()
    when gate
      candidate = eval_run(adapter: "local", dir: "suites", trials: 3)
      when score_compare(baseline, candidate)
        git_stage(["."])
        git_commit("improve: adopt candidate")
        baseline = eval_adopt(candidate)
      else
        git_reset(snapshot)
    else
      git_reset(snapshot)
    done = candidates_empty(candidates)
    candidates = candidates_advance(candidates)
  return baseline
