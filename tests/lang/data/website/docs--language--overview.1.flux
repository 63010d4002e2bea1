flow release-check
  parallel
    branch $status
      $status = git_status()
    branch $tests
      $tests = cargo_test({args: ["--workspace"]})
  assert $tests, "test run produced no output"
  ctx $evidence
    purpose "decide whether this tree is releasable"
    budget 8000
    include $status, $tests
  $verdict = ai.reason({ask: "Is this tree ready to release? Answer with reasons.", ctx: $evidence})
  return { verdict: $verdict, status: $status }
