agent_loop support
  $intent = detect_intent()
  $step = explore({state: $intent.state})
  $answer = present_results({step: $step})
  return $answer

agent guide
  model "openrouter/google/gemini-2.5-flash"
  loop "support"
