flow review-diff -> String
  $diff = git_diff()

  $prompt = """Analyse this diff and suggest improvements.
Focus on correctness, not style.

Diff:
{diff}"""

  $notes = ai.reason({ask: $prompt})
  return $notes
