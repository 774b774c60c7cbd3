/// English plurals for inverse relationship names: employee -> employees, entry -> entries. A
/// table named in the plural already (`orders`, `employee_territories`) gives its name as it is.
enum Inflection {
    static func plural(_ word: String) -> String {
        let lower = word.lowercased()
        if isPlural(lower) { return word }
        if lower.hasSuffix("s") || lower.hasSuffix("x") || lower.hasSuffix("z")
            || lower.hasSuffix("ch") || lower.hasSuffix("sh") {
            return word + "es"
        }
        if lower.hasSuffix("y"), let before = lower.dropLast().last, !"aeiou".contains(before) {
            return word.dropLast() + "ies"
        }
        return word + "s"
    }

    /// Ends in `s` as plurals do: not as the singulars `class`, `address`, `status`, `campus`,
    /// `analysis` do.
    static func isPlural(_ lower: String) -> Bool {
        lower.hasSuffix("s") && !lower.hasSuffix("ss") && !lower.hasSuffix("us") && !lower.hasSuffix("is")
    }
}
