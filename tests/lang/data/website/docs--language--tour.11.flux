flow explain-failure
  src = read("crates/flux-lang/src/runtime.rs")
  tests = cargo_test(args: ["-p", "flux-lang"])
  ctx debug
    purpose "explain a failing flux-lang test"
    budget 9000
    include src, tests
  answer = ai.reason(ask: "What is the most likely cause?", ctx: debug)
  return answer
