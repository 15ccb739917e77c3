//! `#[derive(Equivalence)]` for phalanx.
//!
//! Contract: the derive accepts only structs (named, tuple or unit) whose fields all
//! implement `phalanx::datatype::Equivalence` or are arrays (nested to any depth) of such
//! — arrays are buffers of D elements, not `Equivalence`, as in rsmpi, so an array field
//! `[E; D]` is described here as D contiguous copies of `E`'s datatype — and emits a compile-time assertion that
//! the struct has no padding (the sum of its field sizes equals its size), so that every
//! byte of the value is data and every bit pattern is valid. Enums and unions are
//! rejected: their bit patterns are restricted.
//! * The emitted paths name the phalanx crate by the name the deriving crate imports it
//!   under (`proc-macro-crate`): `mpi = { package = "phalanx", … }` — the one-line port
//!   from rsmpi — gets `::mpi::…`; a crate without phalanx among its dependencies (or
//!   phalanx itself, which is `extern crate self as phalanx`) gets `::phalanx::…`.

use proc_macro::TokenStream;
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Ident, Index};

/// The path of the phalanx crate as the deriving crate names it (module docs).
fn phalanx_path() -> proc_macro2::TokenStream {
    match crate_name("phalanx") {
        Ok(FoundCrate::Name(n)) => {
            let id = Ident::new(&n, proc_macro2::Span::call_site());
            quote!(::#id)
        }
        Ok(FoundCrate::Itself) | Err(_) => quote!(::phalanx),
    }
}

/// The expression building the type map of a field of type `ty`: arrays (also nested,
/// parenthesized or in invisible groups) as contiguous copies of their element's.
fn type_map_expr(krate: &proc_macro2::TokenStream, ty: &syn::Type) -> proc_macro2::TokenStream {
    match ty {
        syn::Type::Array(a) => {
            let len = &a.len;
            let elem = type_map_expr(krate, &a.elem);
            quote!(#krate::datatype::TypeMap::contiguous(#len, &#elem))
        }
        syn::Type::Paren(p) => type_map_expr(krate, &p.elem),
        syn::Type::Group(g) => type_map_expr(krate, &g.elem),
        _ => quote!(#krate::datatype::type_map_of::<#ty>()),
    }
}

/// Derives `Equivalence` for a struct without padding whose fields are all `Equivalence`.
#[proc_macro_derive(Equivalence)]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return syn::Error::new_spanned(
            &input.generics,
            "derive(Equivalence) does not support generic structs",
        )
        .to_compile_error()
        .into();
    }
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        _ => {
            return syn::Error::new_spanned(
                name,
                "derive(Equivalence) supports only structs: enums and unions have invalid bit \
                 patterns",
            )
            .to_compile_error()
            .into()
        }
    };
    let (members, types): (Vec<proc_macro2::TokenStream>, Vec<&syn::Type>) = match fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| {
                let id = f.ident.as_ref().expect("named field");
                (quote!(#id), &f.ty)
            })
            .unzip(),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let idx = Index::from(i);
                (quote!(#idx), &f.ty)
            })
            .unzip(),
        Fields::Unit => (Vec::new(), Vec::new()),
    };
    let krate = phalanx_path();
    let maps: Vec<proc_macro2::TokenStream> =
        types.iter().map(|t| type_map_expr(&krate, t)).collect();
    let expanded = quote! {
        const _: () = {
            assert!(
                0 #( + ::core::mem::size_of::<#types>() )* == ::core::mem::size_of::<#name>(),
                concat!("derive(Equivalence): struct ", stringify!(#name),
                        " has padding; add explicit fields or reorder them")
            );
        };
        // SAFETY: every field is Equivalence (checked by the trait bounds below) and the
        // struct has no padding (checked by the const assertion above), so every byte is
        // data and every bit pattern is a valid value.
        unsafe impl #krate::datatype::Equivalence for #name {
            type Out = #krate::datatype::TypeMap;
            fn equivalent_datatype() -> #krate::datatype::TypeMap {
                #krate::datatype::TypeMap::structure(
                    ::core::mem::size_of::<Self>(),
                    &[ #( (
                        ::core::mem::offset_of!(#name, #members),
                        #maps,
                    ) ),* ],
                )
            }
        }
    };
    expanded.into()
}
