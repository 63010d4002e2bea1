# multi-flow file (a module)
flow fetch-and-grep
  $hits = grep({pattern: "TODO", glob: "*.rs"})
  return $hits

flow summarize(text: String) -> String
  $summary = task({role: "summarizer", task: "Summarize:\n{text}"})
  return $summary
