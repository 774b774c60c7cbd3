/// `records completion bash|zsh`: scripts that complete the CLI's options and subcommands.
enum Completion {
    static let options = ["-H", "--host", "-p", "--port", "-u", "--user", "-c", "--command", "-f", "--file", "--url", "--tls", "--tls-direct",
                          "--tls-ca", "--format", "--continue", "--connect-timeout", "--repeat", "--interval", "--where", "--version", "--help"]
    static let subcommands = ["export", "import", "watch", "codegen", "completion"]

    static func script(for shell: String) -> String? {
        let words = (options + subcommands).joined(separator: " ")
        switch shell {
        case "bash":
            return """
                # records completion for bash: source <(records completion bash)
                _records() {
                    local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]}
                    case "$previous" in
                        --format) COMPREPLY=($(compgen -W "table json csv" -- "$current")); return ;;
                        -f|--file|--tls-ca|import) COMPREPLY=($(compgen -f -- "$current")); return ;;
                        completion) COMPREPLY=($(compgen -W "bash zsh" -- "$current")); return ;;
                        codegen) COMPREPLY=($(compgen -W "swift" -- "$current")); return ;;
                    esac
                    COMPREPLY=($(compgen -W "\(words)" -- "$current"))
                }
                complete -F _records records

                """
        case "zsh":
            return """
                #compdef records
                # records completion for zsh: records completion zsh > "${fpath[1]}/_records"
                _records() {
                    case "${words[CURRENT-1]}" in
                        --format) compadd table json csv; return ;;
                        -f|--file|--tls-ca|import) _files; return ;;
                        completion) compadd bash zsh; return ;;
                        codegen) compadd swift; return ;;
                    esac
                    compadd -- \(words)
                }
                compdef _records records

                """
        default:
            return nil
        }
    }
}
