flow summarize-readme
  src = read("README.md")
  ctx brief
    purpose "summarize the project README"
    budget 6000
    include src
  summary = ai.reason(ask: "Summarize the project in five bullets.", ctx: brief)
  return summary
