board execution
  scope "repository"
  profile "execution"
  kind "markdown"
  root "./board"
