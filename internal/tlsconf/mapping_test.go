package tlsconf

import (
	"errors"
	"strings"
	"testing"
)

// Reference: KIP-371; Kafka's SslPrincipalMapperTest and the
// ssl.principal.mapping.rules documentation. Every expected value below,
// unless its comment says otherwise, was produced by Java 17 running
// Kafka's splitting and parsing regular expressions and Rule.apply on
// the same input.

// kafkaDocsRules is the example of Kafka's documentation (security.html,
// "Customizing SSL User Name").
const kafkaDocsRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`

// kafkaTestRules is SslPrincipalMapperTest.testSslPrincipalMapper's.
const kafkaTestRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT`

func TestMapKafkaExamples(t *testing.T) {
	for _, tc := range []struct{ rules, dn, want string }{
		{kafkaDocsRules, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"},
		{kafkaDocsRules, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"},
		{kafkaDocsRules, "CN=alice,OU=eng,O=Acme,C=US", "CN=alice,OU=eng,O=Acme,C=US"},
		{kafkaTestRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{kafkaTestRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{kafkaTestRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{kafkaTestRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{kafkaTestRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		// testCommaWithWhitespace: the escaped comma DistinguishedName
		// prints is part of the name the rules see.
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},
	} {
		m, err := ParseMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("ParseMappingRules(%q): %v", tc.rules, err)
		}
		if got, err := m.Map(tc.dn); got != tc.want || err != nil {
			t.Errorf("rules %q: Map(%q) = %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
}

func TestParseMappingRulesValidity(t *testing.T) {
	valid := []string{
		"DEFAULT",
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`,
		`RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U`,
		`RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`,
		`RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/`,
		kafkaDocsRules,
		kafkaTestRules,
	}
	for _, rules := range valid {
		if _, err := ParseMappingRules(rules); err != nil {
			t.Errorf("ParseMappingRules(%q): %v", rules, err)
		}
	}
	invalid := []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		`RULE:CN=(.*?),OU=ServiceUsers.*/$1`,
		`rule:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/L`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/U`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/LU`,
		// Beyond Kafka's tests, same verdicts from Java:
		"RULE:a/b/ x, DEFAULT",
		"DEFAULTRULE:a/b/",
		"DEFAULT DEFAULT",
		"RULE:a/b/L x",
		"RULE:a/b/UL",
		`RULE:^CN=([a-z]+),.*$/\/`, // "\/" escapes the slash: one short
		// Fjord's refusals where Kafka fails only when the rule applies
		// (mapping.go, "Differences from Kafka"):
		`RULE:^CN=[a-z]+,.*$/$1/`,      // a group of a pattern without groups
		`RULE:^CN=([a-z]+),.*$/$/`,     // "$" with nothing after
		`RULE:^CN=([a-z]+),.*$/x$/`,    // the same, at the end
		`RULE:^CN=([a-z]+),.*$/$x/`,    // "$" before a non-digit
		`RULE:^CN=(?<u>[a-z]+)$/${v}/`, // unknown group name
		`RULE:^CN=(?<u>[a-z]+)$/${u/`,  // unclosed group name
		// RE2 refuses what java.util.regex has and Go does not:
		`RULE:^CN=(?=x).*$/$0/`,   // lookahead
		`RULE:^CN=(a)\1$/$1/`,     // backreference
		`RULE:^CN=a*+$/x/`,        // possessive quantifier
		"RULE:a/b/\nx",            // a line break inside a rule
		"RULE:a\\\nb/c/, DEFAULT", // an escaped line break
	}
	for _, rules := range invalid {
		if m, err := ParseMappingRules(rules); err == nil {
			t.Errorf("ParseMappingRules(%q) = %s, want an error", rules, m)
		}
	}
}

// TestParseMappingRulesSplitting is SslPrincipalMapperTest
// .testRulesSplitting, with String's form (a rule's last "/" kept)
// where Kafka's toString drops it.
func TestParseMappingRulesSplitting(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		// seeing is believing
		{"", ""},
		{"DEFAULT", "DEFAULT"},
		{"RULE://", "RULE://"},
		{"RULE:/.*/", "RULE:/.*/"},
		{"RULE:/.*/L", "RULE:/.*/L"},
		{"RULE://,DEFAULT", "RULE://,DEFAULT"},
		{"  RULE:// ,  DEFAULT  ", "RULE://,DEFAULT"},
		{"  RULE:   /     / ,  DEFAULT  ", "RULE:   /     /,DEFAULT"},
		{"  RULE:  /     /U   ,DEFAULT  ", "RULE:  /     /U,DEFAULT"},
		{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "RULE:([A-Z]*)/$1/U,RULE:([a-z]+)/$1/,DEFAULT"},
		// empty rules are ignored
		{",   , , ,      , , ,   ", ""},
		{",,RULE://,,,DEFAULT,,", "RULE://,DEFAULT"},
		{",  , RULE: /   /    ,,,   DEFAULT, ,   ", "RULE: /   /,DEFAULT"},
		{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "RULE:   /  /U,DEFAULT"},
		// escape sequences
		{`RULE:\/\\\(\)\n\t/\/\//`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		// rules rule
		{
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		},
		// String.trim removes control characters too.
		{"\x01DEFAULT\x01", "DEFAULT"},
	} {
		m, err := ParseMappingRules(tc.rules)
		if err != nil {
			t.Errorf("ParseMappingRules(%q): %v", tc.rules, err)
			continue
		}
		if got := m.String(); got != tc.want {
			t.Errorf("ParseMappingRules(%q) = %q, want %q", tc.rules, got, tc.want)
		}
	}
}

// TestMapReplacement pins Java's Matcher.matches, String.replaceAll and
// appendReplacement, and Kafka's escapeLiteralBackReferences.
func TestMapReplacement(t *testing.T) {
	for _, tc := range []struct{ rule, dn, want string }{
		{`RULE:^CN=([a-z]+),.*$/$2/`, `CN=duke,O=x`, `$2`},       // above the group count: literal
		{`RULE:^CN=([a-z]+),.*$/$1$5/`, `CN=duke,O=x`, `duke$5`}, //
		{`RULE:^CN=([a-z]+),.*$/$12/`, `CN=duke,O=x`, `duke2`},   // longest prefix that is a group
		{`RULE:^CN=([a-z]+),.*$/$0!/`, `CN=duke,O=x`, `CN=duke,O=x!`},
		{`RULE:^CN=([a-z]+),.*$/$01/`, `CN=duke,O=x`, `duke`}, // $0 then "1" extends to group 1
		{`RULE:^CN=(?<user>[a-z]+),.*$/${user}/`, `CN=duke,O=x`, `duke`},
		{`RULE:^CN=([a-z]+),.*$/\$1/`, `CN=duke,O=x`, `$1`},
		{`RULE:^CN=([a-z]+),.*$/a\\b/`, `CN=duke,O=x`, `a\b`},
		{`RULE:(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)/$11$10$1$12/`, `abcdefghijk`, `kjaa2`},
		{`RULE:(a)(b)?/[$2]/`, `a`, `[]`}, // a group that did not take part
		{`RULE:(a)|b/$1-/`, `b`, `-`},
		{`RULE:a|ab/X/`, `ab`, `Xb`}, // matches() takes "ab"; replaceAll's first find takes "a"
		{`RULE:[a-z]+/<$0>/`, `abc`, `<abc>`},
		// replaceAll's empty match after a non-empty one
		{`RULE:.*/X/`, `abc`, `XX`},
		{`RULE:.*/service/`, `CN=alice,O=Acme`, `serviceservice`},
		{`RULE:^.*$/service/`, `CN=alice,O=Acme`, `service`},
		{`RULE:(.*)/x$1/`, `abc`, `xabcx`},
		{`RULE:(a*)(b?)/[$1|$2]/`, `aab`, `[aa|b][|]`},
		{`RULE:.*/X/`, `日本`, `XX`},
		{`RULE:(?:ab)*/X/`, `abab`, `XX`},
		{`RULE:(?:[a-z]*,?)*/X/`, `ab,cd`, `XX`},
		{`RULE:a*\b/X/`, `aaa`, `XX`}, // \b sees the "a" before the end
		{`RULE:^a*/X/`, `aaa`, `X`},   // ^ does not hold at the end
		{`RULE:x*/-/`, ``, `-`},
		{`RULE:/e/`, ``, `e`},
		{`RULE:^CN=(.*)$/$1/L`, `CN=ÀÉÎ`, `àéî`},
		{`RULE:(?i)cn=([A-Z]+).*/$1/L`, `CN=ALICE,O=x`, `alice`},
		{`RULE:CN=(\w+)\b.*/$1/`, `CN=bob,O=x`, `bob`},
		// Not Java's (mapping.go, "Differences from Kafka"): Kafka
		// fails these two when they apply, and upper-cases ß to SS.
		{`RULE:^CN=([a-z]+),.*$/$5$6/`, `CN=duke,O=x`, `$5$6`},
		{`RULE:^CN=([a-z]+),.*$/\$5/`, `CN=duke,O=x`, `$5`},
		{`RULE:CN=([^,]*),.*/$1/U`, `CN=straße,O=x`, `STRAßE`},
	} {
		m, err := ParseMappingRules(tc.rule)
		if err != nil {
			t.Errorf("ParseMappingRules(%q): %v", tc.rule, err)
			continue
		}
		if got, err := m.Map(tc.dn); got != tc.want || err != nil {
			t.Errorf("rule %q: Map(%q) = %q, %v; want %q", tc.rule, tc.dn, got, err, tc.want)
		}
	}
}

// TestParseMappingRulesLinear: a long run of whitespace inside a rule
// is crossed once, not once per byte (a regression: scanning it was
// quadratic).
func TestParseMappingRulesLinear(t *testing.T) {
	long := "RULE:a/b/x" + strings.Repeat(" ", 1<<20) + "y"
	if _, err := ParseMappingRules(long); err == nil {
		t.Error("accepted a rule with text after its flag")
	}
	if _, err := ParseMappingRules("DEFAULT" + strings.Repeat(" ", 1<<20)); err != nil {
		t.Error(err)
	}
}

func TestMapNoMatchingRule(t *testing.T) {
	for _, rules := range []string{
		"",        // no rules: Kafka's explicit empty value refuses everyone
		",, ,",    // only empty rules
		"RULE://", // matches only the empty name
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`,
	} {
		m, err := ParseMappingRules(rules)
		if err != nil {
			t.Fatalf("ParseMappingRules(%q): %v", rules, err)
		}
		if got, err := m.Map("CN=Duke,OU=ServiceUsers,O=Org,C=US"); !errors.Is(err, ErrNoMatchingRule) {
			t.Errorf("rules %q: Map = %q, %v; want ErrNoMatchingRule", rules, got, err)
		}
	}
	var m *PrincipalMapper // nil: DEFAULT
	if got, err := m.Map("CN=a"); got != "CN=a" || err != nil {
		t.Errorf("nil mapper: Map = %q, %v", got, err)
	}
	if m.String() != DefaultMappingRules {
		t.Errorf("nil mapper: String = %q", m.String())
	}
}

// FuzzParseMappingRules checks, for any rules string:
//   - ParseMappingRules never panics;
//   - what it accepts, String prints in a form it accepts again, and
//     that form is stable (parse, print, parse, print: same text);
//   - Map never panics, on a DN from the input and on a fixed one.
func FuzzParseMappingRules(f *testing.F) {
	for _, seed := range []string{
		"", ",", " ", "DEFAULT", "RULE://", "RULE:/", "RULE:", `RULE:\`, `RULE:\/`,
		kafkaDocsRules, kafkaTestRules,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		`RULE:.*/X/`, `RULE:(a)(b)?/[$2]/`, `RULE:(?<u>a)/${u}$1$01$9\$/U`,
		"DEFAULT" + strings.Repeat(",", 1000), strings.Repeat("RULE:a/b/,", 100) + "garbage",
		"RULE:a/b/\n", "RULE:\xff/\xfe/", "RULE:a/$/",
	} {
		f.Add(seed, "CN=alice,OU=eng,O=Acme,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParseMappingRules(rules)
		if err != nil {
			return
		}
		printed := m.String()
		again, err := ParseMappingRules(printed)
		if err != nil {
			t.Fatalf("ParseMappingRules(%q) printed %q, which does not parse: %v", rules, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("ParseMappingRules(%q): printed %q, then %q", rules, printed, again.String())
		}
		m.Map(dn)
		m.Map("CN=alice,OU=eng,O=Acme,C=US")
	})
}
