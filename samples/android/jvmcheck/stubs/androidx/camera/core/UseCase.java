package androidx.camera.core; public abstract class UseCase {}
